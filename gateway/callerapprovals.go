package gateway

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/wire"
)

// handleCallerDecision is POST /api/tools/v1/approvals/{id}/{approve|deny}:
// the caller's own human answers an approval of a rule with approver:
// caller. Only the tenant's own approvals of such rules: another
// tenant's, or one an operator decides, is 403 approval_not_yours. Only a
// person decides (a provider token, host-user:): a static agent token is
// 403 not_an_approver, so an agent cannot approve its own calls. The
// decision's by is the token's principal; the body, optional for an
// approve, is {"note": "..."}.
func (s *Server) handleCallerDecision(w http.ResponseWriter, r *http.Request) {
	var approve bool
	switch chi.URLParam(r, "decision") {
	case "approve":
		approve = true
	case "deny":
	default:
		callpath.WriteProblem(w, callpath.NewProblem(wire.CodeNotFound, "no such endpoint: decide with …/approve or …/deny"))
		return
	}
	if r.Method != http.MethodPost {
		p := callpath.NewProblem(wire.CodeMethodNotAllowed, "decide an approval with POST")
		p.WithAllow(http.MethodPost)
		callpath.WriteProblem(w, p)
		return
	}
	id, in, ok := s.readDecision(w, r, true)
	if !ok {
		return
	}
	if in.By != "" {
		callpath.WriteProblem(w, callpath.NewProblem(wire.CodeInvalidJSON, `send only "note": the decision's "by" is the token's principal`))
		return
	}
	if err := idempotency.CheckNote(approve, in.Note); err != nil {
		callpath.WriteProblem(w, callpath.NewProblem(wire.CodeInvalidJSON, err.Error()))
		return
	}
	store, ok := s.approvalStore(w)
	if !ok {
		return
	}
	rec, err := store.GetApproval(r.Context(), id)
	if s.approvalError(w, r, err) {
		return
	}
	tenant := callpath.TenantFrom(r.Context())
	switch {
	case rec.Scope.Tenant != tenant:
		callpath.WriteProblem(w, callpath.NewProblem(wire.CodeApprovalNotYours, "this approval belongs to another tenant"))
		return
	case rec.Approval == nil || rec.Approval.Approver.OrDefault() != idempotency.ApproverCaller:
		callpath.WriteProblem(w, callpath.NewProblem(wire.CodeApprovalNotYours, "an operator decides this approval (its rule's approver is operator)"))
		return
	}
	// The approval id names one record for good (the scope and the
	// approver are written with it), so the check above still holds when
	// the store decides.
	s.decideApproval(w, r, id, callpath.ApprovalDecision{Approve: approve, Decider: callpath.PrincipalFrom(r.Context()), Note: in.Note})
}
