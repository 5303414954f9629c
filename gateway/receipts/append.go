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

// maxAppendAttempts bounds the retries of one append under contention:
// each lost race means another append won, so the chain progresses.
const maxAppendAttempts = 100

// Appender is the shared [Store.Append] of every backend: it seals after
// the head it last saw for the tenant (cached, so an uncontended append is
// one compare-and-append) and retries with the head the store answers
// when another writer appended first.
type Appender struct {
	log Log
	now func() time.Time

	mu    sync.Mutex
	heads map[string]Head
}

// NewAppender returns an Appender over log; now is the clock of receipts
// appended without a time (nil: time.Now).
func NewAppender(log Log, now func() time.Time) *Appender {
	if now == nil {
		now = time.Now
	}
	return &Appender{log: log, now: now, heads: map[string]Head{}}
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
	head := a.head(tenant)
	for range maxAppendAttempts {
		if err := ctx.Err(); err != nil {
			return Receipt{}, fmt.Errorf("receipts: append for %s: %w", tenant, err)
		}
		sealed := SealAfter(head, r)
		line, err := Encode(sealed)
		if err != nil {
			return Receipt{}, err
		}
		current, err := a.log.CompareAndAppend(ctx, tenant, head, sealed, line)
		switch {
		case err == nil:
			a.setHead(tenant, HeadOf(sealed))
			return sealed, nil
		case errors.Is(err, ErrHeadMoved):
			head = current
			a.setHead(tenant, current)
		default:
			return Receipt{}, fmt.Errorf("receipts: append for %s: %w", tenant, err)
		}
	}
	return Receipt{}, fmt.Errorf("receipts: append for %s after %d attempts: %w", tenant, maxAppendAttempts, ErrContended)
}

func (a *Appender) head(tenant string) Head {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.heads[tenant]
}

func (a *Appender) setHead(tenant string, h Head) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if h.Seq >= a.heads[tenant].Seq { // a slower append must not move the cache back
		a.heads[tenant] = h
	}
}
