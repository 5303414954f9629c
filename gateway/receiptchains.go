package gateway

import (
	"bytes"
	"context"
	"fmt"
	"sync"

	"github.com/toolgateway/toolgateway/gateway/console"
	"github.com/toolgateway/toolgateway/gateway/receipts"
)

// consoleVerifyWindow bounds the receipts one console view verifies per
// tenant: a chain up to that long is verified whole on every view; a
// longer one, from the window before the head the previous view verified,
// reading at most consoleVerifyMax, so each view re-checks the recent
// receipts and catches up with the new ones.
const (
	consoleVerifyWindow = 2000
	consoleVerifyMax    = 4 * consoleVerifyWindow
)

// chainChecks remembers, per tenant, how far the console verified the
// chain and what it found, so a view's work stays bounded.
type chainChecks struct {
	mu     sync.Mutex
	chains map[string]*chainCheck
}

// chainCheck is one tenant's chain as verified so far.
type chainCheck struct {
	head    receipts.Head // the last receipt verified
	checked int64         // receipts verified, over every view
	problem string        // the first failure; once found, the chain stays broken
}

// states verifies every tenant's chain in store, a bounded run each, and
// answers their states.
func (c *chainChecks) states(ctx context.Context, store receipts.Store) ([]console.ChainState, error) {
	tenants, err := store.Tenants(ctx)
	if err != nil {
		return nil, fmt.Errorf("gateway: receipt chains: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.chains == nil {
		c.chains = map[string]*chainCheck{}
	}
	out := make([]console.ChainState, 0, len(tenants))
	for _, tenant := range tenants {
		cc := c.chains[tenant]
		if cc == nil {
			cc = &chainCheck{}
			c.chains[tenant] = cc
		}
		if err := cc.advance(ctx, store, tenant); err != nil {
			return nil, err
		}
		out = append(out, console.ChainState{Tenant: tenant, Head: cc.head.Seq, Receipts: cc.checked, Verified: cc.problem == "", Problem: cc.problem})
	}
	return out, nil
}

// advance verifies the window of tenant's chain from consoleVerifyWindow
// receipts before the head verified last, and checks that this head is
// still the receipt it was (a receipt altered since is named).
func (cc *chainCheck) advance(ctx context.Context, store receipts.Store, tenant string) error {
	if cc.problem != "" {
		return nil
	}
	var buf bytes.Buffer
	f := receipts.Filter{Tenant: tenant, After: max(0, cc.head.Seq-consoleVerifyWindow), Limit: receipts.MaxLimit}
	for read := 0; read < consoleVerifyMax; {
		page, next, err := store.List(ctx, f)
		if err != nil {
			return fmt.Errorf("gateway: receipt chain of %s after seq %d: %w", tenant, f.After, err)
		}
		for _, r := range page {
			if r.Seq == cc.head.Seq && r.Hash != cc.head.Hash {
				cc.problem = fmt.Sprintf("%s: seq %d changed since it was verified", receipts.ProblemAltered, r.Seq)
				return nil
			}
			line, err := receipts.Encode(r)
			if err != nil {
				return err
			}
			buf.Write(append(line, '\n'))
		}
		read += len(page)
		if next == 0 {
			break
		}
		f.After = next
	}
	rep, err := receipts.Verify(&buf)
	if err != nil {
		cc.problem = err.Error()
		return nil
	}
	for _, t := range rep.Tenants {
		if t.Failure != nil {
			cc.problem = t.Failure.String()
			return nil
		}
		cc.checked += max(0, t.Last-max(cc.head.Seq, t.First-1))
		cc.head = receipts.Head{Seq: t.Last, Hash: t.Head}
	}
	return nil
}
