package callpath

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/toolgateway/toolgateway/gateway/decide"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/principal"
	"github.com/toolgateway/toolgateway/gateway/receipts"
	"github.com/toolgateway/toolgateway/wire"
)

// Decisions on approvals, whatever surface takes them (admin API, console,
// the caller's endpoint, MCP elicitation, the CLI through the admin API):
// one path, so who may decide, what a decision must carry and what it
// leaves in the receipts are the same everywhere.

// ApprovalDecision is one decider's answer to an approval, as a surface
// verified it.
type ApprovalDecision struct {
	Approve bool
	// Decider is who decides, as the surface authenticated them: a
	// signed-in person, or principal.Admin for the admin token; never a
	// name the decider typed.
	Decider principal.Principal
	// ClaimedBy is the name typed with the admin token (kept beside
	// token:admin, never as the decider).
	ClaimedBy string
	// Note is required for a deny; at most idempotency.MaxNoteBytes.
	Note string
	// InHost: the answer came from the person's own UI at the MCP host
	// (elicitation), which counts as a person's answer to an approver:
	// caller rule whatever the token.
	InHost bool
}

// DecisionRefused is a decision DecideApproval refused before the store
// saw it; Problem is the answer (400, 403 not_an_approver or
// self_approval, 501).
type DecisionRefused struct{ Problem *Problem }

// Error is the problem's detail.
func (e *DecisionRefused) Error() string { return e.Problem.Code + ": " + e.Problem.Detail }

// DecideApproval records d on approval id after checking that d's decider
// may decide it under the tool's rules of now (decide.Policy.MayDecide):
// a refusal is a *DecisionRefused (400 for the note, 403 not_an_approver or
// self_approval); the store's errors (ErrNotFound, an
// *idempotency.ApprovalNotPendingError) come back as they are. With a
// quorum, an approve adds the decider to the approval's approvers and
// leaves it pending until there are enough (the store does it in one
// atomic step); the first deny is final. A final decision is receipted
// with its decider, claimed name, note and the call's requester.
func (s *Engine) DecideApproval(ctx context.Context, id string, d ApprovalDecision) (idempotency.Record, error) {
	if err := idempotency.CheckNote(d.Approve, d.Note); err != nil {
		return idempotency.Record{}, &DecisionRefused{NewProblem(wire.CodeInvalidAdminRequest, err.Error())}
	}
	store, ok := s.opts.Store.(idempotency.Approvals)
	if !ok {
		return idempotency.Record{}, &DecisionRefused{NewProblem(wire.CodeAdminUnsupported, "this idempotency store keeps no approvals")}
	}
	rec, err := store.GetApproval(ctx, id)
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("read approval: %w", err)
	}
	a := rec.Approval
	if a == nil {
		return idempotency.Record{}, fmt.Errorf("read approval: %w", idempotency.ErrNotFound)
	}
	policy := s.settings.Load().decisions[rec.Scope.Tool]
	decider := decide.Decider{ID: d.Decider.ID, Person: d.Decider.IsPerson() || d.InHost, Claims: d.Decider.Claims}
	if err := policy.MayDecide(ctx, a.Rule, decide.Approver(a.Approver.OrDefault()), a.Requester, decider); err != nil {
		s.log.InfoContext(ctx, "approval decision refused", "approval_id", id, "by", d.Decider.ID, "reason", err.Error())
		if errors.Is(err, decide.ErrSelfApproval) {
			return idempotency.Record{}, &DecisionRefused{NewProblem(wire.CodeSelfApproval, "the requester of a call cannot decide its approval; another approver must")}
		}
		return idempotency.Record{}, &DecisionRefused{NewProblem(wire.CodeNotAnApprover, "you are not an approver of this call (its rule's approvers decide it)")}
	}
	decided, err := store.DecideApproval(ctx, id, idempotency.ApprovalDecision{Approve: d.Approve, By: d.Decider.ID, ClaimedBy: d.ClaimedBy, Note: d.Note})
	if err != nil {
		return idempotency.Record{}, err
	}
	if decided.State != idempotency.StateAwaitingApproval {
		s.receiptOfDecision(decided, d)
	}
	s.log.InfoContext(ctx, "approval decided", "approval_id", id, "approved", d.Approve, "by", d.Decider.ID, "claimed_by", d.ClaimedBy,
		"state", string(decided.State), "tenant", rec.Scope.Tenant, "tool", rec.Scope.Tool, "key_prefix", idempotency.KeyPrefix(rec.Scope.Key))
	return decided, nil
}

// receiptOfDecision enqueues the receipt of an approval's final decision.
func (s *Engine) receiptOfDecision(rec idempotency.Record, d ApprovalDecision) {
	if s.receipts == nil {
		return
	}
	a := rec.Approval
	r := receipts.Receipt{Event: approvalEvent(d.Approve), Tool: rec.Scope.Tool, Key: receipts.KeyHash(rec.Scope.Key),
		ExecutionID: rec.ExecutionID, By: d.Decider.ID, ClaimedBy: d.ClaimedBy, Note: d.Note,
		Decision: string(decide.Approve), Requester: a.Requester}
	if rec.Step != nil {
		r.Session, r.Step = rec.Step.SessionID, strconv.FormatUint(rec.Step.Index, 10)
	}
	if a.Rule >= 0 {
		r.Rule = "decide[" + strconv.Itoa(a.Rule) + "]"
	}
	s.receipts.enqueue(rec.Scope.Tenant, r)
}
