package callpath

import (
	"context"
	"errors"
	"fmt"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/principal"
)

// What an adapter needs to let the caller's own human decide an approval
// in its protocol (MCP elicitation, approver: caller): the question to
// ask, on the approval_pending problem, and one call to record the answer.

// CallerApproval is a pending approval whose rule's approver is caller:
// what the adapter shows the human (the tool and its canonical
// arguments) and the id it decides.
type CallerApproval struct {
	ID                 string
	Tool               string
	Reason             string
	CanonicalArguments string
}

// ErrNotCallersApproval is what DecideCallerApproval answers for an
// approval of another tenant, or one an operator decides.
var ErrNotCallersApproval = errors.New("the approval is not the caller's to decide")

// callerApproval is the question of a pending approval a, or nil when an
// operator decides it.
func callerApproval(st *callState, a *idempotency.Approval) *CallerApproval {
	if a.Approver.OrDefault() != idempotency.ApproverCaller {
		return nil
	}
	return &CallerApproval{ID: a.ID, Tool: st.call.Entry.Spec.Name, Reason: a.Reason, CanonicalArguments: string(st.canonical)}
}

// DecideCallerApproval records the caller's own decision on approval id,
// answered by the person in the MCP host's UI (elicitation), with note:
// only the tenant's own approvals of rules with approver: caller
// (ErrNotCallersApproval otherwise). The decider is the request's
// principal (token:<tenant> without one), counted as a person: the host's
// UI is the person's own. An approval already decided or expired is no
// error: the call made again answers where it stands (the first decision
// holds); a decision the rules refuse is.
func (s *Engine) DecideCallerApproval(ctx context.Context, tenant, id string, approve bool, note string) error {
	store, ok := s.opts.Store.(idempotency.Approvals)
	if !ok {
		return errors.New("the idempotency store keeps no approvals")
	}
	rec, err := store.GetApproval(ctx, id)
	if err != nil {
		return fmt.Errorf("read approval: %w", err)
	}
	if rec.Scope.Tenant != tenant || rec.Approval == nil || rec.Approval.Approver.OrDefault() != idempotency.ApproverCaller {
		return ErrNotCallersApproval
	}
	who := PrincipalFrom(ctx)
	if who.IsZero() {
		who = principal.Token(tenant)
	}
	if !approve && note == "" {
		note = "declined in the MCP host"
	}
	_, err = s.DecideApproval(ctx, id, ApprovalDecision{Approve: approve, Decider: who, Note: note, InHost: true})
	if errors.Is(err, idempotency.ErrApprovalNotPending) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("decide approval: %w", err)
	}
	return nil
}
