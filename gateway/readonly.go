package gateway

import (
	"context"
	"errors"
	"net/http"

	"github.com/toolgateway/toolgateway/tools"
)

// runReadOnly runs a read-only tool: no key, nothing stored, every call runs.
func (s *Server) runReadOnly(w http.ResponseWriter, r *http.Request, entry *tools.Entry, body []byte) {
	ctx := r.Context()
	name := entry.Spec.Name
	if !s.enter() {
		setOutcome(ctx, name, outcomeToolError)
		writeProblem(w, newProblem(http.StatusInternalServerError, CodeToolFailed, "the gateway is shutting down; retry"))
		return
	}
	defer s.inflight.Done()
	gauge := s.metrics.inFlight.WithLabelValues(name)
	gauge.Inc()
	defer gauge.Dec()

	// A read-only call has no record to protect, so the client's own
	// cancellation may stop it.
	toolCtx, cancel := context.WithTimeoutCause(ctx, s.policy(name).Timeout, context.DeadlineExceeded)
	defer cancel()
	stop := context.AfterFunc(s.baseCtx, cancel)
	defer stop()

	req := &tools.Request{Arguments: body, Tenant: tenantFrom(ctx)}
	req.SessionID, req.StepIndex, req.HasStep = optionalStepHeaders(r.Header)
	resp, err := s.callTool(toolCtx, entry, req)
	if err == nil && resp == nil {
		err = errors.New("tool returned neither a response nor an error")
	}
	if err == nil && (resp.Status < 100 || resp.Status > 599) {
		err = errors.New("tool returned an invalid status")
	}
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
	ct := resp.ContentType
	if ct == "" {
		ct = "application/json"
	}
	h := w.Header()
	h.Set("Content-Type", ct)
	w.WriteHeader(resp.Status)
	_, _ = w.Write(resp.Body)
}
