package callpath

import (
	"context"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// The wait stage: a duplicate of a call in flight, or a call held for an
// approval whose caller opted in to wait for it, waits up to Call.Wait
// for the outcome by polling the store; the pipeline runs decide and
// claim again at each poll (pipeline.go), so the rules of now decide each
// claim that may consume an approval. Polling keeps replicas independent
// of any pub/sub channel and costs one round trip per poll.

// Polling intervals of the wait: the first poll after waitFirstPoll, each
// next one twice as late, up to waitMaxPoll.
const (
	waitFirstPoll = 20 * time.Millisecond
	waitMaxPoll   = 250 * time.Millisecond
)

// waiting is the wait stage's own state on the call: when it gives up,
// and how long until the next poll.
type waiting struct {
	deadline time.Time
	delay    time.Duration
}

// wait is the wait stage: true when the call polls the store again (after
// sleeping until the next poll), false when it answers with the claim's
// last decision: the decision is not one to wait on, the call does not
// wait, or its wait is over (its deadline passed, its client went away,
// the gateway is shutting down).
func (s *Engine) wait(ctx context.Context, st *callState) bool {
	if st.claimErr != nil || !waitable(st.call, st.decision.Outcome) || st.call.Wait <= 0 {
		return false
	}
	w := &st.wait
	if !st.waited {
		st.waited = true
		w.deadline, w.delay = time.Now().Add(st.call.Wait), waitFirstPoll
	}
	left := time.Until(w.deadline)
	if left <= 0 {
		return false
	}
	timer := time.NewTimer(min(w.delay, left))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-s.waitCtx.Done(): // shutting down: answer "in progress", take nothing over
		return false
	case <-timer.C:
	}
	w.delay = min(w.delay*2, waitMaxPoll)
	return true
}

// waitable says whether c's wait waits on outcome: a duplicate in flight
// (for its outcome), or a pending approval when the caller opted in
// (Call.WaitForApproval: REST's Prefer: wait=N, approval; for its
// decision, and if approved, to run the call). Without the opt-in a
// pending approval answers at once: SDKs send Prefer: wait=N for
// duplicates that finish in seconds, and a human answers in minutes.
func waitable(c *Call, o idempotency.Outcome) bool {
	return o == idempotency.OutcomeInProgress || (o == idempotency.OutcomeAwaitingApproval && c.WaitForApproval)
}
