package callpath

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// Recording a tool's answer for replay, through a store outage.
//
// The completion is first written on the call's own path, with renewals
// holding the lease, for at most max(storeCallTimeout, lock_ttl). If the
// store has not taken it by then (it is down), the client gets the tool's
// answer anyway, and the completion is kept as pending and retried in the
// background: written again (owner- and fencing-checked, so it can never
// overwrite another owner's record) every completionRetryEvery until it
// lands, until the store says another owner took the record over, or until
// the store has answered again for a whole lock_ttl without taking it. A
// claim this gateway makes for the same record first tries the pending
// completion, so a retry that reaches this replica replays instead of
// taking the expired lease over. A drain waits for pending completions like
// for a tool in flight, up to its bound; when the bound cuts one short, the
// outcome is logged and counted as not recorded.
//
// What remains: a retry that reaches another replica after the store
// answers again and before the next background attempt lands can take the
// expired lease over and run the tool again; docs/reliability.md has the
// measured window.

// completionRetryEvery is the pause between two background attempts:
// short, because the first claim after the store comes back may take the
// expired lease over. Pending completions are few (calls that finished
// while the store was down), so the attempts cost little.
const completionRetryEvery = 50 * time.Millisecond

// pendingCompletion is a completion the store has not taken yet.
type pendingCompletion struct {
	lease  idempotency.Lease
	stored idempotency.StoredResponse
	ttl    time.Duration

	// mu serialises attempts (the background loop and a claim of the same
	// record); done is set once the outcome is settled either way.
	mu   sync.Mutex
	done bool
}

// pendingCompletions are this gateway's pending completions by scope.
type pendingCompletions struct {
	count atomic.Int64 // lets a claim skip the lock when there are none
	mu    sync.Mutex
	by    map[idempotency.Scope]*pendingCompletion
}

func (ps *pendingCompletions) add(p *pendingCompletion) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.by == nil {
		ps.by = map[idempotency.Scope]*pendingCompletion{}
	}
	ps.by[p.lease.Scope] = p
	ps.count.Store(int64(len(ps.by)))
}

func (ps *pendingCompletions) remove(p *pendingCompletion) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.by[p.lease.Scope] == p {
		delete(ps.by, p.lease.Scope)
	}
	ps.count.Store(int64(len(ps.by)))
}

func (ps *pendingCompletions) get(scope idempotency.Scope) *pendingCompletion {
	if ps.count.Load() == 0 {
		return nil
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.by[scope]
}

// recordCompletion writes stored as the call's outcome; see the top of
// this file for what happens when the store does not answer.
func (s *Engine) recordCompletion(ctx, storeCtx context.Context, st *callState, stored idempotency.StoredResponse) {
	name, lease, keeper := st.call.Entry.Spec.Name, st.lease, st.exec.keeper
	ttl := st.policy.ReplayTTL
	err := keeper.finish(storeCtx, func() error { return s.store.Complete(storeCtx, lease, stored, ttl) })
	if errors.Is(err, idempotency.ErrLeaseLost) && s.completedBy(storeCtx, lease) {
		err = nil // an earlier attempt landed and only its reply was lost
	}
	switch {
	case err == nil:
	case isStoreVerdict(err):
		s.completionNotRecorded(ctx, name, lease, err)
	default:
		s.log.WarnContext(ctx, "outcome not recorded yet: the store does not answer; answering the client and retrying in the background",
			"tool", name, "execution_id", lease.ExecutionID, "error", err)
		p := &pendingCompletion{lease: lease, stored: stored, ttl: ttl}
		s.pending.add(p)
		// The call's own execution still counts in inflight, so this Add
		// cannot race a Drain's Wait that already returned.
		s.inflight.Add(1)
		go func() {
			defer s.inflight.Done()
			defer s.pending.remove(p)
			s.completeLate(context.WithoutCancel(ctx), p)
		}()
	}
}

// settlePending is called before a claim: if this gateway holds a pending
// completion of the record, it tries it once, so that the claim replays it
// rather than taking the expired lease over.
func (s *Engine) settlePending(ctx context.Context, scope idempotency.Scope) {
	if p := s.pending.get(scope); p != nil {
		attemptCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeCallTimeout)
		defer cancel()
		s.attemptPending(attemptCtx, ctx, p)
	}
}

// attemptPending writes p once; it reports whether p is settled (landed,
// or lost for good), logging the settlement, and the store's error
// otherwise.
func (s *Engine) attemptPending(ctx, logCtx context.Context, p *pendingCompletion) (settled bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return true, nil
	}
	err = s.store.Complete(ctx, p.lease, p.stored, p.ttl)
	if errors.Is(err, idempotency.ErrLeaseLost) && s.completedBy(ctx, p.lease) {
		err = nil
	}
	switch {
	case err == nil:
		s.log.InfoContext(logCtx, "outcome recorded after the store came back", "tool", p.lease.Scope.Tool, "execution_id", p.lease.ExecutionID)
	case isStoreVerdict(err):
		s.completionNotRecorded(logCtx, p.lease.Scope.Tool, p.lease, err)
	default:
		return false, err
	}
	p.done = true
	return true, nil
}

// completeLate retries a pending completion until it is settled, or until
// the store has answered again for a whole lock_ttl without taking it, or
// until a drain runs out of time.
func (s *Engine) completeLate(ctx context.Context, p *pendingCompletion) {
	var answeredAt time.Time // when the store first answered a ping again
	timer := time.NewTimer(completionRetryEvery)
	defer timer.Stop()
	for {
		select {
		case <-s.baseCtx.Done(): // a drain ran out of time
			p.mu.Lock()
			if !p.done {
				p.done = true
				s.completionNotRecorded(ctx, p.lease.Scope.Tool, p.lease, errors.New("gateway shutting down before the store answered"))
			}
			p.mu.Unlock()
			return
		case <-timer.C:
		}
		attemptCtx, cancel := context.WithTimeout(ctx, storeCallTimeout)
		settled, err := s.attemptPending(attemptCtx, ctx, p)
		if !settled && answeredAt.IsZero() && s.store.Ping(attemptCtx) == nil {
			answeredAt = time.Now()
		}
		cancel()
		if settled {
			return
		}
		if !answeredAt.IsZero() && time.Since(answeredAt) > s.opts.LockTTL {
			p.mu.Lock()
			if !p.done {
				p.done = true
				s.completionNotRecorded(ctx, p.lease.Scope.Tool, p.lease, err)
			}
			p.mu.Unlock()
			return
		}
		timer.Reset(completionRetryEvery)
	}
}

// completedBy reports whether the record holds lease's own completion: a
// retried completion meets it as "not the owner any more".
func (s *Engine) completedBy(ctx context.Context, lease idempotency.Lease) bool {
	rec, err := s.store.Get(ctx, lease.Scope)
	return err == nil && rec.State == idempotency.StateCompleted &&
		rec.ExecutionID == lease.ExecutionID && rec.FencingToken == lease.FencingToken
}

// completionNotRecorded logs and counts a completion that did not land. The
// client still gets the tool's real answer; a retry will not replay it.
func (s *Engine) completionNotRecorded(ctx context.Context, tool string, lease idempotency.Lease, err error) {
	s.metrics.unrecorded.WithLabelValues(tool).Inc()
	if errors.Is(err, idempotency.ErrLeaseLost) {
		s.log.ErrorContext(ctx, "outcome not recorded: lease lost to another owner", "tool", tool, "execution_id", lease.ExecutionID, "fencing_token", lease.FencingToken)
		return
	}
	s.log.ErrorContext(ctx, "outcome not recorded: store failed", "tool", tool, "execution_id", lease.ExecutionID, "error", err)
}
