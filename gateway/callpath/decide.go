package callpath

import (
	"context"
	"time"

	"github.com/toolgateway/toolgateway/gateway/decide"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/wire"
)

// The decide stage: a tool's `decide` rules (package decide) say, per
// call, allow, approve or deny. It runs after the schema and before the
// store decision. A deny ends the call here (403 call_denied) and never
// reaches the store: an APPROVED record must not be consumed by a call
// its rules now deny. An approve goes on to the claim with the approval
// to write (or to consume, when it was approved), so consuming it costs
// no round trip of its own. A tool without rules costs one map lookup.

// Defaults of the approvals section.
const (
	DefaultApprovalTimeout   = 24 * time.Hour
	DefaultApprovalUseWithin = time.Hour
)

// ApprovalSettings bound how long approvals live (config `approvals`).
type ApprovalSettings struct {
	// Timeout is how long an approval may stay pending (default 24h).
	Timeout time.Duration
	// UseWithin is how long an approved call waits for its caller's next
	// call (default 1h).
	UseWithin time.Duration
}

// withDefaults fills the zero fields.
func (a ApprovalSettings) withDefaults() ApprovalSettings {
	a.Timeout = orDefault(a.Timeout, DefaultApprovalTimeout)
	a.UseWithin = orDefault(a.UseWithin, DefaultApprovalUseWithin)
	return a
}

// The outcome labels of the decide stage's answers.
const (
	labelDenied          = "denied"
	labelApprovalPending = "approval_pending"
	labelApprovalDenied  = "approval_denied"
	labelApprovalExpired = "approval_expired"
)

// approvalRetryAfter is the Retry-After of approval_pending: a human
// answers in minutes, so polling faster only costs round trips.
const approvalRetryAfter = 30

// decide is the decide stage: it ends the call with a deny, or passes it
// on (st.approval set when its rules ask for an approval). At each poll
// of a call that waits (st.waited, wait.go) it decides again under the
// settings of now, before the claim that could consume an approval,
// without counting it a second time: a rule that denies meanwhile wins.
func (s *Engine) decide(ctx context.Context, st *callState) bool {
	live := s.settings.Load()
	policy := live.decisions[st.call.Entry.Spec.Name]
	switch {
	case st.waited && !st.decided: // no rules when the call came: none now
		return false
	case !st.waited && policy.Rules() == 0:
		return false
	}
	p := s.decideWith(ctx, st, live, policy)
	if p != nil || st.unprotected != 0 {
		// A refusal is stored nowhere and a call without a record runs
		// each time: each is counted as it arrives (once per call).
		s.metrics.countDecision(st)
	}
	if p != nil {
		return st.refuse(p)
	}
	return false
}

// decideWith evaluates policy for the call (metrics.go's countDecision
// counts it, once per call).
func (s *Engine) decideWith(ctx context.Context, st *callState, live *settings, policy *decide.Policy) *Problem {
	c := st.call
	name := c.Entry.Spec.Name
	st.decided = true
	in := decide.Input{Arguments: st.canonical, Tenant: c.Tenant, API: string(c.API), Budgets: st.budgets}
	if id := st.identity(); id.HasStep {
		in.Session, in.Step, in.HasStep = id.SessionID, id.StepIndex, true
	}
	v, err := policy.Decide(ctx, &in)
	if err != nil {
		s.log.ErrorContext(ctx, "decide rule failed; the call is denied", "tool", name, "rule", v.Rule, "error", err)
	}
	v = live.mode.Apply(v)
	st.verdict = &v
	st.approval = nil
	switch v.Effective() {
	case decide.Deny:
		p := NewProblem(wire.CodeCallDenied, "the tool's decide rules deny this call: "+v.Reason+"; nothing ran")
		p.Reason = v.Reason
		return p
	case decide.Approve:
		if st.unprotected != 0 {
			// No record to bind an approval to (a read-only tool, an
			// unkeyed call): it cannot be approved, so it cannot run.
			reason := "the call needs an approval, which only a call with an idempotency identity can get: " + v.Reason
			p := NewProblem(wire.CodeCallDenied, reason)
			p.Reason = reason
			return p
		}
		if v.Quorum > 1 && !idempotency.KeepsPrincipals(s.opts.Store) {
			reason := "the rule asks a quorum of approvers, which this idempotency store cannot count: " + v.Reason
			p := NewProblem(wire.CodeCallDenied, reason)
			p.Reason = reason
			return p
		}
		st.approval = &idempotency.ApprovalClaim{
			ID: newULID(), Rule: v.Rule, Reason: v.Reason, Approver: idempotency.Approver(v.Approver),
			Timeout: live.approvals.Timeout, UseWithin: live.approvals.UseWithin,
			Requester: c.Requester.ID, Quorum: v.Quorum, Binding: approvalBinding(policy, c.Entry.Spec),
		}
	}
	return nil
}

// enforcedLabel is the enforced label of gateway_decisions_total.
func enforcedLabel(enforced bool) string {
	if enforced {
		return "true"
	}
	return "false"
}

// identity is the call's session and step as the rules see them: its
// checked identity when it has a record, else what the adapter parsed.
func (st *callState) identity() Identity {
	if st.unprotected != 0 {
		return st.call.Identity
	}
	return st.id
}

// approval is the approval stage: it ends a call whose claim found its
// record's approval pending, denied or expired (st.approvalOutcome), and
// passes every other call on.
func (s *Engine) approval(ctx context.Context, st *callState) bool {
	if !st.approvalOutcome {
		return false
	}
	d := st.decision
	a := d.Approval
	if a == nil { // a store always sends it; never answer without an id
		s.log.ErrorContext(ctx, "store returned an approval outcome without its approval", "tool", st.call.Entry.Spec.Name)
		return st.end(storeUnavailable("the idempotency store gave an invalid answer"))
	}
	var p *Problem
	switch d.Outcome {
	case idempotency.OutcomeAwaitingApproval:
		p = NewProblem(wire.CodeApprovalPending, "the call waits for a human's approval; nothing ran. Make the same call again after Retry-After seconds, or send Prefer: wait=N").
			WithRetryAfter(min(approvalRetryAfter, ceilSeconds(time.Until(a.ExpiresAt))))
		p.Caller = callerApproval(st, a) // callerdecision.go
	case idempotency.OutcomeApprovalDenied:
		p = NewProblem(wire.CodeApprovalDenied, "the call's approval was denied; it will not run")
		p.Reason, p.By = orString(a.Note, a.Reason), a.DecidedBy
	default: // idempotency.OutcomeApprovalExpired
		p = NewProblem(wire.CodeApprovalExpired, "the call's approval expired before it was used (approvals.timeout pending, approvals.use_within approved); it will not run")
		p.Reason, p.By = a.Reason, a.DecidedBy
	}
	p.ApprovalID, p.ApprovalExpiresAt = a.ID, a.ExpiresAt.UTC().Format(time.RFC3339)
	return st.refuse(p)
}

// isNewApproval says whether d is the pending approval req just wrote
// (its id is the one req minted; a claim that finds one pending answers
// the stored id).
func isNewApproval(req idempotency.ClaimRequest, d idempotency.Decision) bool {
	return d.Outcome == idempotency.OutcomeAwaitingApproval && req.Approval != nil && d.Approval != nil && d.Approval.ID == req.Approval.ID
}

// orString is s, or def when s is empty.
func orString(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
