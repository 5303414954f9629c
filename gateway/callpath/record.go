package callpath

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// record is the record stage of a claimed call that ran: 2xx–4xx (except
// 408, 425, 429) is completed for replay; an uncertain outcome
// (outcomeUncertain) of a lease_expiry: unknown tool leaves the record
// UNKNOWN; everything else releases the record so a retry runs the tool
// again. It ends the call with the tool's answer, or the problem of its
// failure. Only a claimed call whose tool ran gets here: run ends every
// other one.
func (s *Engine) record(ctx context.Context, st *callState) bool {
	x, name := &st.exec, st.call.Entry.Spec.Name
	// At least a whole lease to ride out a store restart (Redis answers
	// LOADING while it replays its AOF).
	storeCtx, cancelStore := context.WithTimeout(x.detached, max(storeCallTimeout, s.opts.LockTTL))
	defer cancelStore()
	storeCtx, endCompletion := s.childSpan(storeCtx, "completion")
	defer endCompletion(nil)
	if x.txc != nil {
		return st.end(s.recordTx(ctx, storeCtx, st)) // txcall.go
	}
	if x.err != nil {
		return st.end(st.failed(s.recordFailure(ctx, storeCtx, st)))
	}
	resp := x.resp
	switch {
	case recordable(resp.Status) && !resp.InputRequired:
		stored := idempotency.StoredResponse{Status: resp.Status, ContentType: resp.ContentType, Body: resp.Body}
		s.metrics.countExecution(name, executionCompleted, nil)
		s.recordCompletion(ctx, storeCtx, st, stored) // completion.go
	case st.policy.LeaseExpiry == tools.LeaseExpiryUnknown && outcomeUncertain(x.leaseCtx, st.policy, resp, nil):
		what := fmt.Sprintf("its upstream answered %d", resp.Status)
		return st.end(st.failed(s.leaveUnknown(ctx, storeCtx, st, NewProblem(wire.CodeToolFailed, ""), what, errors.New(what))))
	default:
		s.metrics.countExecution(name, executionReleased, nil)
		// 408, 425, 429 and a 5xx that are the tool's own word, marked not
		// executed or (408/425/429) listed in not_executed_statuses, and
		// every one of them for a rerun tool: nothing (reliable) was done,
		// or a rerun is what the policy allows; forget the call. So
		// too for a request for client input: the continuation is a new
		// call with the same identity.
		s.release(storeCtx, name, st.lease, x.keeper)
	}
	return st.end(Result{Kind: ResultExecuted, Status: resp.Status, ContentType: resp.ContentType, Body: resp.Body,
		ExecutionID: st.lease.ExecutionID, Label: labelForResponse(resp), InputRequired: resp.InputRequired})
}

// recordable reports whether a tool status is stored for replay: 2xx–4xx,
// except the transient 408, 425 and 429 (the tool did nothing).
func recordable(status int) bool {
	if status < 200 || status > 499 {
		return false
	}
	return !slices.Contains(tools.TransientStatuses, status)
}

// recordFailure is the record step of a tool that gave no answer, and the
// problem the client gets. An uncertain outcome (outcomeUncertain) of a
// lease_expiry: unknown tool leaves the record UNKNOWN (leaveUnknown).
// Every other failure releases the record, so a retry runs the tool again.
func (s *Engine) recordFailure(ctx, storeCtx context.Context, st *callState) *Problem {
	x, lease, name := &st.exec, st.lease, st.call.Entry.Spec.Name
	p := s.toolErrorProblem(x.leaseCtx, x.err)
	if st.policy.LeaseExpiry == tools.LeaseExpiryUnknown && outcomeUncertain(x.leaseCtx, st.policy, nil, x.err) {
		return s.leaveUnknown(ctx, storeCtx, st, p, p.Code, x.err)
	}
	s.metrics.countExecution(name, executionReleased, x.err)
	s.release(storeCtx, name, lease, x.keeper)
	s.log.WarnContext(ctx, "tool failed", "tool", name, "execution_id", lease.ExecutionID, "code", p.Code, "error", x.err)
	return p
}

// leaveUnknown marks the record of a lease_expiry: unknown tool whose
// outcome is uncertain UNKNOWN, and returns p made the client's answer:
// the effect may have happened, so no retry may run the tool again; the
// answer keeps its code but is not retryable. what says for the client
// what made it uncertain; cause says it for the log.
func (s *Engine) leaveUnknown(ctx, storeCtx context.Context, st *callState, p *Problem, what string, cause error) *Problem {
	x, lease, name := &st.exec, st.lease, st.call.Entry.Spec.Name
	s.metrics.countExecution(name, executionUnknown, nil)
	s.markUnknown(storeCtx, name, lease, x.keeper, st.policy.ReplayTTL)
	st.madeUnknown = true // receipt.go receipts it
	s.log.ErrorContext(ctx, "tool outcome uncertain; the record is left UNKNOWN for an operator (lease_expiry: unknown)",
		"tool", name, "execution_id", lease.ExecutionID, "code", p.Code, "error", cause)
	p.Detail = "the tool gave no certain outcome (" + what + ") and may have acted; its policy is lease_expiry: unknown, " +
		"so the record is UNKNOWN: do not retry (every retry answers outcome_unknown) until an operator checks the side effect and resolves the record"
	return p.WithRetryable(false)
}

// outcomeUncertain is the one rule of what leaves open whether a tool
// acted — for a lease_expiry: unknown tool, no release without evidence
// that it did not. Of an answer (resp, err nil): an upstream's 5xx
// (Response.Relayed) that the upstream did not mark not executed — it may
// have acted and then failed, or a proxy in front of it answered — and
// likewise its 408, 425 or 429 unless the tool's policy lists that status
// as evidence (tools.Policy.StatusNotExecuted). Of an error: the tool's
// timeout, its cancellation by a drain, an upstream that took the request
// and gave no final answer (tools.ErrOutcomeUncertain: a connection lost,
// a malformed status line, a status outside 200–599), one
// that answered with a result over its cap (tools.ErrResponseTooLarge: it
// acted, but the gateway cannot store what it said), or one that answered
// with an error (tools.ErrUpstreamRejected) unless that proves it did not
// run (tools.ErrNotExecuted). A lost lease is never uncertain here: another
// owner holds the record, and the store decides.
func outcomeUncertain(toolCtx context.Context, policy tools.Policy, resp *tools.Response, err error) bool {
	cause := context.Cause(toolCtx)
	switch {
	case errors.Is(cause, errLeaseLost):
		return false
	case err == nil:
		if !resp.Relayed || resp.NotExecuted {
			return false
		}
		return resp.Status >= 500 || (!recordable(resp.Status) && !policy.StatusNotExecuted(resp.Status))
	case errors.Is(err, tools.ErrNotExecuted):
		return false
	case errors.Is(err, tools.ErrOutcomeUncertain), errors.Is(err, tools.ErrResponseTooLarge),
		errors.Is(err, tools.ErrUpstreamRejected),
		errors.Is(err, context.DeadlineExceeded), errors.Is(cause, context.DeadlineExceeded),
		errors.Is(cause, context.Canceled):
		return true
	}
	return false
}

// markUnknown turns the caller's IN_PROGRESS record UNKNOWN for ttl. When
// the store does not take it, the record stays IN_PROGRESS until its lease
// expires, and then lease_expiry: unknown makes it UNKNOWN all the same.
func (s *Engine) markUnknown(ctx context.Context, tool string, lease idempotency.Lease, keeper *leaseKeeper, ttl time.Duration) {
	err := keeper.finish(ctx, func() error { return s.store.MarkUnknown(ctx, lease, ttl) })
	switch {
	case err == nil:
	case errors.Is(err, idempotency.ErrLeaseLost):
		// Not the owner any more: the lease expired, and its policy made the
		// record UNKNOWN (or an earlier attempt landed and only its reply
		// was lost).
		s.log.WarnContext(ctx, "mark unknown skipped: lease already lost", "tool", tool, "execution_id", lease.ExecutionID)
	default:
		s.log.ErrorContext(ctx, "mark unknown failed; the record becomes UNKNOWN when its lease expires", "tool", tool, "execution_id", lease.ExecutionID, "error", err)
	}
}

// release deletes the record so a retry runs the tool again.
func (s *Engine) release(ctx context.Context, tool string, lease idempotency.Lease, keeper *leaseKeeper) {
	err := keeper.finish(ctx, func() error { return s.store.Release(ctx, lease) })
	switch {
	case err == nil:
	case errors.Is(err, idempotency.ErrLeaseLost):
		s.log.WarnContext(ctx, "release skipped: lease already lost", "tool", tool, "execution_id", lease.ExecutionID)
	default:
		// The record stays IN_PROGRESS until its lease expires; then the
		// tool's lease_expiry policy decides (rerun or UNKNOWN).
		s.log.ErrorContext(ctx, "release failed", "tool", tool, "execution_id", lease.ExecutionID, "error", err)
	}
}
