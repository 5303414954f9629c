package callpath

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// leaseKeeper renews a lease every LockTTL/3 while a tool runs. It is a
// self-rescheduling timer rather than a goroutine with a ticker: most tools
// finish before the first renewal, and then the keeper costs nothing.
type leaseKeeper struct {
	s        *Engine
	ctx      context.Context
	lease    idempotency.Lease
	onLost   func()
	interval time.Duration

	// mu is held during a renewal and during the final write (complete or
	// release), so no renewal runs after the record left IN_PROGRESS — it
	// would read as a lost lease.
	mu         sync.Mutex
	timer      *time.Timer
	validUntil time.Time
	stopped    bool
	lost       bool
}

// keepLease starts renewing lease. onLost is called (once) when the store
// says the lease is gone, or when no renewal has succeeded for a whole
// LockTTL: from then on another gateway may legitimately take over.
func (s *Engine) keepLease(ctx context.Context, lease idempotency.Lease, onLost func()) *leaseKeeper {
	k := &leaseKeeper{s: s, ctx: ctx, lease: lease, onLost: onLost, interval: s.opts.LockTTL / 3,
		validUntil: time.Now().Add(s.opts.LockTTL)}
	k.mu.Lock()
	k.timer = time.AfterFunc(k.interval, k.renew)
	k.mu.Unlock()
	return k
}

// renew runs on the timer's goroutine.
func (k *leaseKeeper) renew() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stopped || k.ctx.Err() != nil {
		return
	}
	ttl := k.s.opts.LockTTL
	renewCtx, cancel := context.WithTimeout(k.ctx, k.interval)
	start := time.Now()
	err := k.s.store.Renew(renewCtx, k.lease, ttl)
	cancel()
	switch {
	case err == nil:
		k.validUntil = start.Add(ttl)
		k.timer.Reset(k.interval)
		return
	case errors.Is(err, idempotency.ErrLeaseLost):
	case time.Now().Before(k.validUntil):
		k.s.log.WarnContext(k.ctx, "lease renewal failed; retrying", "tool", k.lease.Scope.Tool, "error", err)
		// Try again, at the latest just after the lease runs out, so its
		// loss is noticed when it happens, not a renewal interval later.
		k.timer.Reset(min(k.interval, time.Until(k.validUntil)+time.Millisecond))
		return
	}
	k.s.log.ErrorContext(k.ctx, "lease lost; cancelling the tool", "tool", k.lease.Scope.Tool, "execution_id", k.lease.ExecutionID, "error", err)
	k.lost, k.stopped = true, true
	k.onLost()
}

// finish makes the final write of the record (complete or release),
// retrying while the store fails (unreachable, or restarting: Redis answers
// LOADING while it replays its AOF) with backoff until ctx ends. Renewals
// may still run between attempts, so the lease holds meanwhile; none runs
// after the write landed. The store's verdicts (lease lost, not found) are
// final. A retry is safe: the writes are owner-checked, so repeating one
// that landed answers "lease lost" and changes nothing.
func (k *leaseKeeper) finish(ctx context.Context, write func() error) error {
	delay := 50 * time.Millisecond
	for {
		final, err := k.finishOnce(write, func(err error) bool {
			return err == nil || errors.Is(err, idempotency.ErrLeaseLost) || errors.Is(err, idempotency.ErrNotFound) || ctx.Err() != nil
		})
		if final {
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		delay = min(2*delay, 500*time.Millisecond)
	}
}

// finishOnce makes one attempt at the final write, with no renewal running
// during it; final(err) says whether the renewals end with it. A write that
// cannot be repeated (a transaction's commit) passes a final that is always
// true.
func (k *leaseKeeper) finishOnce(write func() error, isFinal func(error) bool) (final bool, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	err = write()
	if final = isFinal(err); final {
		k.stopped = true
		k.timer.Stop()
	}
	return final, err
}

// stop ends the renewals and reports whether the lease was lost.
func (k *leaseKeeper) stop() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stopped = true
	k.timer.Stop()
	return k.lost
}
