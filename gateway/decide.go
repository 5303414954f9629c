package gateway

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// decide asks the store, in one atomic step, what to do with the call, and
// acts on the answer.
func (s *Server) decide(w http.ResponseWriter, r *http.Request, c *call) {
	ctx := r.Context()
	name := c.entry.Spec.Name
	d, err := s.claim(ctx, c)
	if err == nil && d.Outcome == idempotency.OutcomeInProgress {
		if wait := preferWait(r.Header, MaxPreferWait); wait > 0 {
			w.Header().Set("Preference-Applied", "wait="+strconv.Itoa(wait))
			d, err = s.awaitOutcome(ctx, c, time.Duration(wait)*time.Second, d)
		}
	}
	if err != nil {
		s.log.ErrorContext(ctx, "store claim failed", "tool", name, "error", err)
		setOutcome(ctx, name, outcomeStoreError)
		writeProblem(w, newProblem(http.StatusServiceUnavailable, CodeStoreUnavailable,
			"the idempotency store is unreachable; the tool was not run").withRetryAfter(1))
		return
	}

	switch d.Outcome {
	case idempotency.OutcomeClaimed:
		if d.TakenOver {
			s.metrics.takeovers.WithLabelValues(name).Inc()
			s.log.WarnContext(ctx, "took over an expired lease; running the tool again", "tool", name, "execution_id", d.Lease.ExecutionID)
		}
		s.execute(w, r, c, d.Lease)
	case idempotency.OutcomeReplay:
		setOutcome(ctx, name, outcomeReplayed)
		writeToolResponse(w, d.Response.Status, d.Response.ContentType, d.Response.Body, true, d.ExecutionID)
	case idempotency.OutcomeInProgress:
		setOutcome(ctx, name, outcomeInProgress)
		writeProblem(w, newProblem(http.StatusConflict, CodeRequestInProgress,
			"a request with this key is still running; retry after Retry-After seconds, or send Prefer: wait=N").
			withRetryAfter(min(ceilSeconds(d.RetryAfter), maxInProgressRetryAfter)))
	case idempotency.OutcomeKeyReused:
		setOutcome(ctx, name, outcomeKeyReused)
		writeProblem(w, newProblem(http.StatusUnprocessableEntity, CodeIdempotencyKeyReused,
			"this Idempotency-Key was first used with other arguments"))
	case idempotency.OutcomeStepConflict:
		setOutcome(ctx, name, outcomeStepConflict)
		p := newProblem(http.StatusUnprocessableEntity, CodeStepConflict,
			"this session step already made another call; give each tool call its own step index")
		if d.Conflict != nil {
			p.Tool, p.ExecutionID = d.Conflict.Tool, d.Conflict.ExecutionID
		}
		writeProblem(w, p)
	case idempotency.OutcomeUnknown:
		setOutcome(ctx, name, outcomeOutcomeUnknown)
		writeProblem(w, newProblem(http.StatusConflict, CodeOutcomeUnknown,
			"the gateway running this call died before recording its outcome; an operator must check the side effect and resolve the record"))
	default:
		s.log.ErrorContext(ctx, "store returned an invalid decision", "tool", name, "outcome", d.Outcome.String())
		setOutcome(ctx, name, outcomeStoreError)
		writeProblem(w, newProblem(http.StatusServiceUnavailable, CodeStoreUnavailable, "the idempotency store gave an invalid answer").withRetryAfter(1))
	}
}

// claim runs one store decision on a context detached from the client: a
// client that hangs up while its claim is on the wire must not leave a
// claimed record that nobody runs (for a lease_expiry: unknown tool it would
// turn UNKNOWN without the tool ever running).
func (s *Server) claim(ctx context.Context, c *call) (idempotency.Decision, error) {
	claimCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeCallTimeout)
	defer cancel()
	return s.store.Claim(claimCtx, s.claimRequest(ctx, c))
}

// awaitOutcome polls the store until the running call finishes, its lease
// expires (and this request takes over), ctx ends or wait passes. Polling
// keeps replicas independent of any pub/sub channel and costs one round
// trip per poll.
func (s *Server) awaitOutcome(ctx context.Context, c *call, wait time.Duration, last idempotency.Decision) (idempotency.Decision, error) {
	deadline := time.Now().Add(wait)
	delay := 20 * time.Millisecond
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return last, nil
		}
		timer.Reset(min(delay, left))
		select {
		case <-ctx.Done():
			return last, nil
		case <-s.waitCtx.Done(): // shutting down: answer 409, take nothing over
			return last, nil
		case <-timer.C:
		}
		d, err := s.claim(ctx, c)
		if err != nil || d.Outcome != idempotency.OutcomeInProgress {
			return d, err
		}
		last = d
		delay = min(delay*2, 250*time.Millisecond)
	}
}

// writeToolResponse sends a tool's outcome (fresh or replayed) unchanged,
// marked as an execution or a replay.
func writeToolResponse(w http.ResponseWriter, status int, contentType string, body []byte, replayed bool, executionID string) {
	setExecutionHeaders(w.Header(), replayed, executionID)
	writeOutcome(w, status, contentType, body)
}

// writeOutcome sends a tool's status, content type and body unchanged.
func writeOutcome(w http.ResponseWriter, status int, contentType string, body []byte) {
	h := w.Header()
	if contentType != "" {
		h.Set("Content-Type", contentType)
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// setExecutionHeaders marks a response of an executed or replayed call.
func setExecutionHeaders(h http.Header, replayed bool, executionID string) {
	h.Set(headerReplayed, strconv.FormatBool(replayed))
	h.Set(headerExecutionID, executionID)
}

// maxInProgressRetryAfter caps the Retry-After of request_in_progress. The
// remaining lease is only an upper bound (a live owner renews it and may
// finish any moment), so a client should not be sent away for all of it.
const maxInProgressRetryAfter = 5

// ceilSeconds rounds d up to whole seconds, at least 1.
func ceilSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}
