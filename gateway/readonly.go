package gateway

import (
	"context"
	"net/http"

	"github.com/toolgateway/toolgateway/tools"
)

// runReadOnly runs a read-only tool: no key, nothing stored, every call runs.
func (s *Server) runReadOnly(w http.ResponseWriter, r *http.Request, entry *tools.Entry, body []byte) {
	ctx := r.Context()
	name := entry.Spec.Name
	leave, ok := s.enter(name)
	if !ok {
		setOutcome(ctx, name, outcomeToolError)
		writeProblem(w, newProblem(http.StatusInternalServerError, CodeToolFailed, "the gateway is shutting down; retry"))
		return
	}
	defer leave()

	// A read-only call has no record to protect, so the client's own
	// cancellation may stop it.
	toolCtx, cancel := context.WithTimeoutCause(ctx, s.policy(name).Timeout, context.DeadlineExceeded)
	defer cancel()
	stop := context.AfterFunc(s.baseCtx, cancel)
	defer stop()

	req := &tools.Request{Arguments: body, Tenant: tenantFrom(ctx)}
	req.SessionID, req.StepIndex, req.HasStep = optionalStepHeaders(r.Header)
	resp, err := s.callTool(toolCtx, entry, req)
	if err != nil {
		p := s.toolErrorProblem(toolCtx, err)
		s.log.WarnContext(ctx, "read-only tool failed", "tool", name, "code", p.Code, "error", err)
		setOutcome(ctx, name, outcomeToolError)
		writeProblem(w, p)
		return
	}
	outcome := outcomeExecuted
	if resp.Status >= 500 {
		outcome = outcomeToolError
	}
	setOutcome(ctx, name, outcome)
	writeOutcome(w, resp.Status, resp.ContentType, resp.Body)
}
