package callpath

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/keyderive"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// run is the run stage. A claimed call's tool runs under the claim's
// lease, and the call goes on to record its outcome; a call with no record
// (read-only, unkeyed) runs as it is and ends with the tool's answer.
func (s *Engine) run(ctx context.Context, st *callState) bool {
	if st.unprotected != 0 {
		return st.end(s.runUnprotected(ctx, st.call, st.unprotected))
	}
	return s.runClaimed(ctx, st)
}

// execution is a claimed call's run: the tool's answer (or error), and
// what holds the claim until record has written the outcome (callState's
// finish lets go of it).
type execution struct {
	resp *tools.Response
	err  error
	// txc is the tool's transaction (transactional tools; txcall.go).
	txc idempotency.TxCall
	// leaseCtx is the tool's context: its cause says why the tool was
	// stopped (timeout, lost lease, drain).
	leaseCtx context.Context
	// detached is the request's context without its cancellation: the
	// keeper and the record outlive a client that hung up.
	detached context.Context
	keeper   *leaseKeeper

	cancelLease context.CancelCauseFunc
	cancelTool  context.CancelFunc
	leaveDrain  func()
}

// runClaimed runs the tool under the lease the claim gave, renewing it,
// detached from the client (one that hangs up must not abort a tool
// half-way; its retry gets "in progress" and then the replay). It ends
// the call only when the tool did not start (a drain; a transaction that
// could not begin).
func (s *Engine) runClaimed(ctx context.Context, st *callState) bool {
	c, x := st.call, &st.exec
	name := c.Entry.Spec.Name
	leave, ok := s.enter(name)
	if !ok {
		// Draining: the tool must not start now. Give the claim back so a
		// retry (on another replica) runs it.
		storeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeCallTimeout)
		defer cancel()
		if err := s.store.Release(storeCtx, st.lease); err != nil {
			s.log.WarnContext(ctx, "release while draining failed", "tool", name, "error", err)
		}
		return st.end(st.failed(NewProblem(wire.CodeToolFailed, "the gateway is shutting down and did not run the tool; retry")))
	}
	x.leaveDrain = leave

	toolCtx, cancelTool := context.WithTimeoutCause(s.baseCtx, st.policy.Timeout, context.DeadlineExceeded)
	x.cancelTool = cancelTool
	leaseCtx, cancelLease := context.WithCancelCause(toolCtx)
	x.leaseCtx, x.cancelLease = leaseCtx, cancelLease
	// The keeper renews until the outcome is written (not just until the
	// tool returns): a completion retried through a store restart must not
	// let another replica take the call over meanwhile. Its context
	// outlives the tool's deadline and a drain's cancel: only finish and
	// stop end the renewals.
	x.detached = context.WithoutCancel(ctx) // one for the keeper and the record
	x.keeper = s.keepLease(x.detached, st.lease, func() { cancelLease(errLeaseLost) })
	req := claimedRequest(st)
	if c.Entry.Spec.Transactional {
		var p *Problem
		if x.txc, p = s.beginTx(ctx, name, st.lease, x.keeper); p != nil {
			return st.end(st.failed(p))
		}
		req.Tx = x.txc.Tx()
	}
	spanCtx, endTool := s.toolSpan(ctx, leaseCtx, name)
	x.resp, x.err = s.callTool(spanCtx, c.Entry, req)
	endTool(x.err)
	return false
}

// claimedRequest is the tool's request for a claimed call: its identity,
// scoped key and the claim's execution id and fencing token.
func claimedRequest(st *callState) *tools.Request {
	c, name := st.call, st.call.Entry.Spec.Name
	req := &tools.Request{
		Arguments:      c.Arguments,
		Tenant:         c.Tenant,
		SessionID:      st.id.SessionID,
		StepIndex:      st.id.StepIndex,
		HasStep:        st.id.HasStep,
		IdempotencyKey: st.id.Key,
		ScopedKey:      keyderive.ScopedKey(c.Tenant, name, st.id.Key),
		ExecutionID:    st.lease.ExecutionID,
		FencingToken:   st.lease.FencingToken,
	}
	c.MultiRoundTrip.handOn(req)
	return req
}

// runUnprotected runs a call that has no record: a read-only tool, or an
// unkeyed call the adapter allows. Every call runs.
func (s *Engine) runUnprotected(ctx context.Context, c *Call, kind ResultKind) Result {
	name := c.Entry.Spec.Name
	leaveSlot, p := s.takeSlot(ctx, c, newULID())
	if p != nil {
		return problemResult(p)
	}
	defer leaveSlot()
	leave, ok := s.enter(name)
	if !ok {
		return problemResult(NewProblem(wire.CodeToolFailed, "the gateway is shutting down; retry"))
	}
	defer leave()

	parent := ctx
	if kind == ResultUnkeyed {
		// A mutating tool must not be aborted half-way by a client that
		// hangs up, record or not.
		parent = context.WithoutCancel(ctx)
	}
	// A read-only call has no record to protect, so the client's own
	// cancellation may stop it; a drain's cancel stops both.
	toolCtx, cancel := context.WithTimeoutCause(parent, s.policy(c.Entry).Timeout, context.DeadlineExceeded)
	defer cancel()
	stop := context.AfterFunc(s.baseCtx, cancel)
	defer stop()

	req := &tools.Request{Arguments: c.Arguments, Tenant: c.Tenant}
	if c.Identity.HasStep {
		req.SessionID, req.StepIndex, req.HasStep = c.Identity.SessionID, c.Identity.StepIndex, true
	}
	c.MultiRoundTrip.handOn(req)
	spanCtx, endTool := s.toolSpan(ctx, toolCtx, name)
	resp, err := s.callTool(spanCtx, c.Entry, req)
	endTool(err)
	s.metrics.countExecution(name, executionNoRecord, err)
	if err != nil {
		p := s.toolErrorProblem(toolCtx, err)
		s.log.WarnContext(ctx, "unprotected tool call failed", "tool", name, "code", p.Code, "error", err)
		return problemResult(p)
	}
	return Result{Kind: kind, Status: resp.Status, ContentType: resp.ContentType, Body: resp.Body, Label: labelForResponse(resp),
		InputRequired: resp.InputRequired}
}

// labelForStatus is the metrics label of a tool's answer.
func labelForStatus(status int) string {
	if status >= 500 {
		return labelToolError
	}
	return labelExecuted
}

// errLeaseLost is the cause of a tool context cancelled because the gateway
// lost its lease (another request may be running the tool now).
var errLeaseLost = errors.New("gateway: lease on the idempotency record lost")

// callTool calls the tool, turning a panic, a missing response or a status
// that is not final (tools.FinalStatus) into an error — of a relayed
// answer, an uncertain outcome: the upstream took the request, and such an
// answer is never passed on as the call's outcome. A response without a
// content type gets application/json.
func (s *Engine) callTool(ctx context.Context, entry *tools.Entry, req *tools.Request) (resp *tools.Response, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.log.ErrorContext(ctx, "tool panicked", "tool", entry.Spec.Name, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			resp, err = nil, fmt.Errorf("tool panicked: %v", p)
		}
	}()
	resp, err = entry.Tool.Call(ctx, req)
	switch {
	case err != nil:
		return nil, err
	case resp == nil:
		return nil, errors.New("tool returned neither a response nor an error")
	case !tools.FinalStatus(resp.Status) && resp.Relayed:
		return nil, fmt.Errorf("tool relayed status %d, not a final status (200–599): %w", resp.Status, tools.ErrOutcomeUncertain)
	case !tools.FinalStatus(resp.Status):
		return nil, fmt.Errorf("tool returned status %d, not a final status (200–599)", resp.Status)
	case resp.ContentType == "":
		resp.ContentType = "application/json"
	}
	return resp, nil
}

// toolErrorProblem maps a tool error to the contract's problem.
func (s *Engine) toolErrorProblem(ctx context.Context, err error) *Problem {
	switch {
	case errors.Is(context.Cause(ctx), errLeaseLost):
		return NewProblem(wire.CodeToolFailed, "the gateway lost the lease on this call while the tool ran; retry to get the outcome")
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(context.Cause(ctx), context.DeadlineExceeded):
		return NewProblem(wire.CodeToolTimeout, "the tool did not finish within its timeout")
	case errors.Is(err, tools.ErrUpstreamRejected): // before ErrUpstreamUnreachable, which it counts as
		return NewProblem(wire.CodeUpstreamUnreachable, "the tool's upstream answered with an error instead of a result; retrying runs it again")
	case errors.Is(err, tools.ErrUpstreamUnreachable):
		return NewProblem(wire.CodeUpstreamUnreachable, "the tool's upstream could not be reached")
	case errors.Is(err, tools.ErrOutcomeUncertain):
		return NewProblem(wire.CodeUpstreamUnreachable, "the tool's upstream took the request but gave no final answer (the connection was lost, or it answered a status outside 200–599)")
	case errors.Is(err, tools.ErrToolChanged): // an unkeyed call, not asked before
		return toolChanged()
	case errors.Is(err, tools.ErrUpstreamUnavailable):
		return NewProblem(wire.CodeUpstreamUnavailable, "the tool's MCP server has not been listed yet; retry").WithRetryAfter(1)
	case errors.Is(err, tools.ErrResponseTooLarge):
		return NewProblem(wire.CodeUpstreamResponseTooLarge, "the tool's upstream answered with a result over the configured cap (max_response_bytes)")
	case errors.Is(context.Cause(ctx), context.Canceled):
		return NewProblem(wire.CodeToolFailed, "the gateway was shutting down and cancelled the tool; retry")
	default:
		return NewProblem(wire.CodeToolFailed, "the tool failed; retrying runs it again")
	}
}
