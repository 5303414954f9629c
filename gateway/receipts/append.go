package receipts

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Log is what a backend provides for [Appender]: one atomic
// compare-and-append. Sealing (SHA-256, JCS) happens in Go, not in the
// store — Redis scripts have no SHA-256 — so every store takes the same
// optimistic shape: seal after the head the writer believes, then write
// only if the head is still that one.
type Log interface {
	// CompareAndAppend stores run (receipts sealed one after the other
	// after expected, at least one) as tenant's next receipts, the last
	// one its new head, if tenant's head is still expected, in one atomic
	// step: all of the run or nothing. Otherwise it writes nothing and
	// returns the current head and [ErrHeadMoved].
	CompareAndAppend(ctx context.Context, tenant string, expected Head, run []Sealed) (Head, error)
}

// Sealed is a sealed receipt and its stored form ([Encode]).
type Sealed struct {
	Receipt Receipt
	Line    []byte
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
	run, err := a.AppendRun(ctx, tenant, []Receipt{r})
	if err != nil {
		return Receipt{}, err
	}
	return run[0], nil
}

// AppendRun implements [Store.AppendRun]: the run is sealed in Go and
// written by one compare-and-append (one store round trip when nobody
// else appended to the chain meanwhile).
func (a *Appender) AppendRun(ctx context.Context, tenant string, rs []Receipt) ([]Receipt, error) {
	if tenant == "" {
		return nil, ErrTenantRequired
	}
	if len(rs) == 0 {
		return nil, nil
	}
	rs = slices.Clone(rs)
	for i := range rs {
		rs[i].Tenant = tenant
		if rs[i].Time.IsZero() {
			rs[i].Time = a.now()
		}
		if y := rs[i].Time.Year(); y < 0 || y > 9999 { // JSON's time range; Seal would panic
			return nil, fmt.Errorf("receipts: append for %s: time %v out of range", tenant, y)
		}
	}
	chain := a.chain(tenant)
	select {
	case chain.turn <- struct{}{}:
		defer func() { <-chain.turn }()
	case <-ctx.Done():
		return nil, fmt.Errorf("receipts: append for %s: waiting for the chain: %w", tenant, ctx.Err())
	}
	run := make([]Sealed, len(rs))
	for range maxAppendAttempts {
		if err := sealRun(chain.head, rs, run); err != nil {
			return nil, err
		}
		current, err := a.log.CompareAndAppend(ctx, tenant, chain.head, run)
		switch {
		case err == nil:
			chain.head = HeadOf(run[len(run)-1].Receipt)
			out := make([]Receipt, len(run))
			for i, s := range run {
				out[i] = s.Receipt
			}
			return out, nil
		case errors.Is(err, ErrHeadMoved):
			chain.head = current
		default:
			return nil, fmt.Errorf("receipts: append for %s: %w", tenant, err)
		}
	}
	return nil, fmt.Errorf("receipts: append for %s after %d attempts: %w", tenant, maxAppendAttempts, ErrContended)
}

// sealRun seals rs one after the other after head into run.
func sealRun(head Head, rs []Receipt, run []Sealed) error {
	for i, r := range rs {
		sealed := SealAfter(head, r)
		line, err := Encode(sealed)
		if err != nil {
			return err
		}
		run[i] = Sealed{Receipt: sealed, Line: line}
		head = HeadOf(sealed)
	}
	return nil
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
