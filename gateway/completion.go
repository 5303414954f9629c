package gateway

import (
	"context"
	"errors"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// Recording a tool's answer for replay, through a store outage.
//
// The completion is first written on the call's own path, with renewals
// holding the lease, for at most max(storeCallTimeout, lock_ttl). If the
// store has not taken it by then (it is down), the client gets the tool's
// answer anyway, and the completion is handed to a background retry: it
// keeps writing it (owner- and fencing-checked, so it can never overwrite
// another owner's record) until it lands, until the store says another
// owner took the record over, or until the store has answered again for a
// whole lock_ttl without taking it. A drain waits for these retries like for
// a tool in flight, up to its bound; when the bound cuts one short, the
// outcome is logged and counted as not recorded.
//
// What remains: between the store answering again and the next retry
// (completionRetryMax at most) a retry of the call can take the expired
// lease over and run the tool again; docs/reliability.md has the measured
// window.

// completionRetryMax is the longest pause between two background attempts:
// short, because the first claim after the store comes back may take the
// expired lease over.
const completionRetryMax = 250 * time.Millisecond

// recordCompletion writes stored as the call's outcome; see the top of
// this file for what happens when the store does not answer.
func (s *Server) recordCompletion(ctx, storeCtx context.Context, cl *claim, lease idempotency.Lease, keeper *leaseKeeper, stored idempotency.StoredResponse) {
	name := cl.call.Entry.Spec.Name
	ttl := cl.policy.ReplayTTL
	err := keeper.finish(storeCtx, func() error { return s.store.Complete(storeCtx, lease, stored, ttl) })
	if errors.Is(err, idempotency.ErrLeaseLost) && s.completedBy(storeCtx, lease) {
		err = nil // an earlier attempt landed and only its reply was lost
	}
	switch {
	case err == nil:
	case errors.Is(err, idempotency.ErrLeaseLost), errors.Is(err, idempotency.ErrNotFound):
		s.completionNotRecorded(ctx, name, lease, err)
	default:
		s.log.WarnContext(ctx, "outcome not recorded yet: the store does not answer; answering the client and retrying in the background",
			"tool", name, "execution_id", lease.ExecutionID, "error", err)
		// The call's own execution still counts in inflight, so this Add
		// cannot race a Drain's Wait that already returned.
		s.inflight.Add(1)
		go func() {
			defer s.inflight.Done()
			s.completeLate(context.WithoutCancel(ctx), name, lease, stored, ttl)
		}()
	}
}

// completeLate retries a completion the store did not take in time; it
// returns when the completion landed or can no longer land.
func (s *Server) completeLate(ctx context.Context, tool string, lease idempotency.Lease, stored idempotency.StoredResponse, ttl time.Duration) {
	var answeredAt time.Time // when the store first answered a ping again
	delay := 50 * time.Millisecond
	timer := time.NewTimer(delay)
	defer timer.Stop()
	for {
		select {
		case <-s.baseCtx.Done(): // a drain ran out of time
			s.completionNotRecorded(ctx, tool, lease, errors.New("gateway shutting down before the store answered"))
			return
		case <-timer.C:
		}
		attemptCtx, cancel := context.WithTimeout(ctx, storeCallTimeout)
		err := s.store.Complete(attemptCtx, lease, stored, ttl)
		if errors.Is(err, idempotency.ErrLeaseLost) && s.completedBy(attemptCtx, lease) {
			err = nil
		}
		if err != nil && answeredAt.IsZero() && !isStoreVerdict(err) && s.store.Ping(attemptCtx) == nil {
			answeredAt = time.Now()
		}
		cancel()
		switch {
		case err == nil:
			s.log.InfoContext(ctx, "outcome recorded after the store came back", "tool", tool, "execution_id", lease.ExecutionID)
			return
		case isStoreVerdict(err):
			s.completionNotRecorded(ctx, tool, lease, err)
			return
		case !answeredAt.IsZero() && time.Since(answeredAt) > s.opts.LockTTL:
			s.completionNotRecorded(ctx, tool, lease, err)
			return
		}
		delay = min(2*delay, completionRetryMax)
		timer.Reset(delay)
	}
}

// completedBy reports whether the record holds lease's own completion: a
// retried completion meets it as "not the owner any more".
func (s *Server) completedBy(ctx context.Context, lease idempotency.Lease) bool {
	rec, err := s.store.Get(ctx, lease.Scope)
	return err == nil && rec.State == idempotency.StateCompleted &&
		rec.ExecutionID == lease.ExecutionID && rec.FencingToken == lease.FencingToken
}

// completionNotRecorded logs and counts a completion that did not land. The
// client still gets the tool's real answer; a retry will not replay it.
func (s *Server) completionNotRecorded(ctx context.Context, tool string, lease idempotency.Lease, err error) {
	s.metrics.unrecorded.WithLabelValues(tool).Inc()
	if errors.Is(err, idempotency.ErrLeaseLost) {
		s.log.ErrorContext(ctx, "outcome not recorded: lease lost to another owner", "tool", tool, "execution_id", lease.ExecutionID, "fencing_token", lease.FencingToken)
		return
	}
	s.log.ErrorContext(ctx, "outcome not recorded: store failed", "tool", tool, "execution_id", lease.ExecutionID, "error", err)
}
