package receipts

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Log is what a backend provides for [Appender]: one atomic
// compare-and-append. Sealing (SHA-256, JCS) happens in Go, not in the
// store — Redis scripts have no SHA-256 — so every store takes the same
// optimistic shape: seal after the head the writer believes, then write
// only if the head is still that one.
type Log interface {
	// CompareAndAppend stores sealed (whose encoding is line) as tenant's
	// new head if tenant's head is still expected, in one atomic step.
	// Otherwise it writes nothing and returns the current head and
	// [ErrHeadMoved].
	CompareAndAppend(ctx context.Context, tenant string, expected Head, sealed Receipt, line []byte) (Head, error)
}

// maxAppendAttempts bounds the retries of one append. Appends of one
// process are serialised per tenant, so a lost race means another replica
// appended: the chain progresses, and losing this often means something
// is wrong (a head rewritten under the writers).
const maxAppendAttempts = 100

// Appender is the shared [Store.Append] of every backend. Per tenant, it
// lets one append of this process at a time through (the others queue),
// seals after the head it last saw (so an uncontended append is one
// compare-and-append), and retries with the head the store answers when
// another replica appended first.
type Appender struct {
	log Log
	now func() time.Time

	mu     sync.Mutex
	chains map[string]*chainTurn
}

// chainTurn is one tenant's chain as this process appends to it.
type chainTurn struct {
	turn chan struct{} // holds a token while an append runs
	head Head          // the last head seen; guarded by turn
}

// NewAppender returns an Appender over log; now is the clock of receipts
// appended without a time (nil: time.Now).
func NewAppender(log Log, now func() time.Time) *Appender {
	if now == nil {
		now = time.Now
	}
	return &Appender{log: log, now: now, chains: map[string]*chainTurn{}}
}

// Append implements [Store.Append].
func (a *Appender) Append(ctx context.Context, tenant string, r Receipt) (Receipt, error) {
	if tenant == "" {
		return Receipt{}, ErrTenantRequired
	}
	r.Tenant = tenant
	if r.Time.IsZero() {
		r.Time = a.now()
	}
	if y := r.Time.Year(); y < 0 || y > 9999 { // JSON's time range; Seal would panic
		return Receipt{}, fmt.Errorf("receipts: append for %s: time %v out of range", tenant, y)
	}
	chain := a.chain(tenant)
	select {
	case chain.turn <- struct{}{}:
		defer func() { <-chain.turn }()
	case <-ctx.Done():
		return Receipt{}, fmt.Errorf("receipts: append for %s: waiting for the chain: %w", tenant, ctx.Err())
	}
	for range maxAppendAttempts {
		sealed := SealAfter(chain.head, r)
		line, err := Encode(sealed)
		if err != nil {
			return Receipt{}, err
		}
		current, err := a.log.CompareAndAppend(ctx, tenant, chain.head, sealed, line)
		switch {
		case err == nil:
			chain.head = HeadOf(sealed)
			return sealed, nil
		case errors.Is(err, ErrHeadMoved):
			chain.head = current
		default:
			return Receipt{}, fmt.Errorf("receipts: append for %s: %w", tenant, err)
		}
	}
	return Receipt{}, fmt.Errorf("receipts: append for %s after %d attempts: %w", tenant, maxAppendAttempts, ErrContended)
}

func (a *Appender) chain(tenant string) *chainTurn {
	a.mu.Lock()
	defer a.mu.Unlock()
	c, ok := a.chains[tenant]
	if !ok {
		c = &chainTurn{turn: make(chan struct{}, 1)}
		a.chains[tenant] = c
	}
	return c
}
