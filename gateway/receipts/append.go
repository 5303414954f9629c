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
	// returns the current head and [ErrHeadMoved] (a *[HeadMovedError]
	// when it read the head receipt's time too).
	//
	// An `executed` receipt whose execution id the chain already has (see
	// [DedupeID]) is never appended twice: checking the run's ids against
	// the tenant's index of executed ids, and adding them, is part of the
	// same atomic step; when some are there already, nothing is written
	// and the answer is a *[DuplicateError] naming them.
	CompareAndAppend(ctx context.Context, tenant string, expected Head, run []Sealed) (Head, error)
}

// DuplicateError is a compare-and-append refused because the chain
// already holds the `executed` receipt of some of the run's executions.
type DuplicateError struct {
	// ExecutionIDs are the run's execution ids the chain already has.
	ExecutionIDs []string
}

func (e *DuplicateError) Error() string {
	return fmt.Sprintf("receipts: %d executions already have their executed receipt", len(e.ExecutionIDs))
}

// DedupeID is the id under which a store indexes r to append it once: the
// execution id of an `executed` receipt, "" for every other receipt (an
// approval's or an operator's events may repeat).
func DedupeID(r Receipt) string {
	if r.Event == EventExecuted {
		return r.ExecutionID
	}
	return ""
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
	// headTime is the head receipt's time, when headTimed: no receipt
	// is dated before its predecessor.
	headTime  time.Time
	headTimed bool
}

// lastReader is a [Log] that reads a chain's last receipt: every store.
// The Appender reads it when another writer moved the head, to date the
// next receipt no earlier than it.
type lastReader interface {
	LastReceipt(ctx context.Context, tenant string) (Receipt, bool, error)
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
	switch {
	case err != nil:
		return Receipt{}, err
	case len(run) == 0:
		return Receipt{}, fmt.Errorf("receipts: append for %s: execution %s: %w", tenant, r.ExecutionID, ErrDuplicate)
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
	rs = dropRepeats(rs, nil)
	chain := a.chain(tenant)
	select {
	case chain.turn <- struct{}{}:
		defer func() { <-chain.turn }()
	case <-ctx.Done():
		return nil, fmt.Errorf("receipts: append for %s: waiting for the chain: %w", tenant, ctx.Err())
	}
	for range maxAppendAttempts {
		if len(rs) == 0 { // every execution already had its receipt
			return nil, nil
		}
		if err := a.learnHeadTime(ctx, tenant, chain); err != nil {
			return nil, err
		}
		run := make([]Sealed, len(rs))
		if err := sealRun(chain.head, chain.headTime, rs, run); err != nil {
			return nil, err
		}
		current, err := a.log.CompareAndAppend(ctx, tenant, chain.head, run)
		var dup *DuplicateError
		switch {
		case err == nil:
			chain.head = HeadOf(run[len(run)-1].Receipt)
			chain.headTime, chain.headTimed = run[len(run)-1].Receipt.Time, true
			out := make([]Receipt, len(run))
			for i, s := range run {
				out[i] = s.Receipt
			}
			return out, nil
		case errors.Is(err, ErrHeadMoved):
			chain.head, chain.headTimed = current, current.Seq == 0
			chain.headTime = time.Time{}
			if moved := (*HeadMovedError)(nil); errors.As(err, &moved) && !moved.HeadTime.IsZero() {
				chain.headTime, chain.headTimed = moved.HeadTime, true
			} // else learnHeadTime reads it before the next attempt
		case errors.As(err, &dup):
			rs = dropRepeats(rs, dup.ExecutionIDs)
		default:
			return nil, fmt.Errorf("receipts: append for %s: %w", tenant, err)
		}
	}
	return nil, fmt.Errorf("receipts: append for %s after %d attempts: %w", tenant, maxAppendAttempts, ErrContended)
}

// dropRepeats returns rs without the executed receipts whose [DedupeID]
// is in known or repeats an earlier one of rs (rs is not modified).
func dropRepeats(rs []Receipt, known []string) []Receipt {
	seen := make(map[string]bool, len(known))
	for _, id := range known {
		seen[id] = true
	}
	kept := make([]Receipt, 0, len(rs))
	for _, r := range rs {
		id := DedupeID(r)
		if id != "" && seen[id] {
			continue
		}
		if id != "" {
			seen[id] = true
		}
		kept = append(kept, r)
	}
	return kept
}

// learnHeadTime reads the time of chain's head receipt when it is not
// known (another writer appended it): one read after a lost race. A head
// whose receipt is gone (expired) dates nothing.
func (a *Appender) learnHeadTime(ctx context.Context, tenant string, chain *chainTurn) error {
	lr, ok := a.log.(lastReader)
	if chain.headTimed || !ok {
		return nil
	}
	last, found, err := lr.LastReceipt(ctx, tenant)
	if err != nil {
		return fmt.Errorf("receipts: append for %s: read the head: %w", tenant, err)
	}
	if found && last.Seq >= chain.head.Seq {
		// The head's receipt, or one after it (another writer appended
		// meanwhile: the compare-and-append below then fails and answers
		// the new head); dating no earlier than a later receipt keeps the
		// chain's times from going back either way.
		chain.headTime = last.Time
	}
	chain.headTimed = true
	return nil
}

// sealRun seals rs one after the other after head, sealed at headTime,
// into run. A receipt dated before its predecessor (a writer's slow
// clock, a receipt recovered from the outbox) takes its predecessor's
// time: a chain's times never go back.
func sealRun(head Head, headTime time.Time, rs []Receipt, run []Sealed) error {
	for i, r := range rs {
		if r.Time.Before(headTime) {
			r.Time = headTime
		}
		headTime = r.Time
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
