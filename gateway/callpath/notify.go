package callpath

import (
	"context"

	"github.com/toolgateway/toolgateway/gateway/notify"
)

// ApprovalNotifier is told of each new pending approval (a
// [notify.Notifier]); Notify must not block the call.
type ApprovalNotifier interface {
	Notify(p notify.Pending) error
	Stats() notify.Stats
}

// notify is the notify stage: it pushes the pending approval the claim
// just wrote (st.newApproval) to the notifier, if any, before the call
// waits for its decision. It only enqueues, and a notification dropped is
// logged, not an error of the call (the admin API lists every pending
// approval anyway). It never ends the call.
func (s *Engine) notify(ctx context.Context, st *callState) {
	a := st.newApproval
	if a == nil || s.opts.Notifier == nil {
		return
	}
	pending := notify.Pending{
		ApprovalID: a.ID, Tool: st.call.Entry.Spec.Name, Tenant: st.call.Tenant,
		CanonicalArguments: st.canonical, Rule: a.Rule, Reason: a.Reason,
		RequestedAt: a.RequestedAt, ExpiresAt: a.ExpiresAt,
	}
	if st.id.HasStep {
		pending.Session, pending.Step, pending.HasStep = st.id.SessionID, st.id.StepIndex, true
	}
	if err := s.opts.Notifier.Notify(pending); err != nil {
		s.log.WarnContext(ctx, "approval notification not sent", "tool", pending.Tool, "approval_id", a.ID, "error", err)
	}
}
