package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

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
	// signed is the latest checkpoint verified (Seq 0: none yet), and
	// anchoredAt its TSA's time.
	signed       receipts.Checkpoint
	anchoredAt   time.Time
	unverifiable bool
}

// states verifies every tenant's chain in store, a bounded run each, and
// answers their states.
func (c *chainChecks) states(ctx context.Context, store receipts.Store, keys receipts.KeySet) ([]console.ChainState, error) {
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
		if err := cc.advance(ctx, store, tenant, keys); err != nil {
			return nil, err
		}
		out = append(out, console.ChainState{Tenant: tenant, Head: cc.head.Seq, Receipts: cc.checked, Verified: cc.problem == "",
			Problem: cc.problem, Checkpoint: cc.signed, AnchoredAt: cc.anchoredAt, Unverifiable: cc.unverifiable})
	}
	return out, nil
}

// advance verifies the window of tenant's chain from consoleVerifyWindow
// receipts before the head verified last, and checks that this head is
// still the receipt it was (a receipt altered since is named). A latest
// checkpoint not verified yet is verified with it, with keys (the
// gateway's public keys), the window then starting no later than the
// receipt before the checkpoint's: its signature, its anchor when it has
// one, and that the chain still holds the receipt it signed (a chain
// truncated or rewritten below it is named).
func (cc *chainCheck) advance(ctx context.Context, store receipts.Store, tenant string, keys receipts.KeySet) error {
	if cc.problem != "" {
		return nil
	}
	latest, err := store.LatestCheckpoints(ctx, tenant)
	if err != nil {
		return fmt.Errorf("gateway: receipt chain of %s: checkpoints: %w", tenant, err)
	}
	var fresh []receipts.Checkpoint
	for _, cp := range latest {
		if cp.Sig != cc.signed.Sig || cp.Anchor != cc.signed.Anchor {
			fresh = append(fresh, cp)
		}
	}
	cc.unverifiable = len(latest) > 0 && len(keys) == 0
	if cc.unverifiable {
		fresh = nil
	}
	after := max(0, cc.head.Seq-consoleVerifyWindow)
	for _, cp := range fresh {
		after = max(0, min(after, cp.Seq-1))
	}
	// A checkpoint verified before is checked again while its seq is in
	// the window: the chain must still reach it (truncation).
	var checked []receipts.Checkpoint
	for _, cp := range latest {
		if !cc.unverifiable && cp.Seq > after {
			checked = append(checked, cp)
		}
	}
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(receipts.ChainHeader{Chain: tenant}); err != nil {
		return err
	}
	f := receipts.Filter{Tenant: tenant, After: after, Limit: receipts.MaxLimit}
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
	for _, cp := range checked {
		if err := json.NewEncoder(&buf).Encode(receipts.CheckpointLine{Checkpoint: cp}); err != nil {
			return err
		}
	}
	rep, err := receipts.VerifyWith(&buf, receipts.VerifyOptions{Keys: keys})
	if err != nil {
		cc.problem = err.Error()
		return nil
	}
	for _, t := range rep.Tenants {
		if t.Failure != nil {
			cc.problem = t.Failure.String()
			return nil
		}
		if t.Checked == 0 {
			continue
		}
		cc.checked += max(0, t.Last-max(cc.head.Seq, t.First-1))
		cc.head = receipts.Head{Seq: t.Last, Hash: t.Head}
	}
	if len(fresh) > 0 {
		cc.signed = fresh[0]
		cc.anchoredAt = time.Time{}
		for _, cp := range fresh {
			if at, err := receipts.CheckAnchor(cp, nil); cp.Anchor != "" && err == nil && at.After(cc.anchoredAt) {
				cc.signed, cc.anchoredAt = cp, at
			}
		}
	}
	return nil
}
