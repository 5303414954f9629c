package callpath

import (
	"context"
	"time"

	"github.com/toolgateway/toolgateway/gateway/budgets"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/wire"
)

// claim is the claim stage: one atomic store decision for the checked
// call, in st.decision (st.claimErr when the store could not decide),
// and st.newApproval when it wrote a pending approval. The pipeline runs
// it again at each poll of a call that waits (wait.go); the answer stage
// acts on the last decision. A call with no record passes by.
func (s *Engine) claim(ctx context.Context, st *callState) {
	// On a context detached from the client: a client that hangs up while
	// its claim is on the wire must not leave a claimed record that nobody
	// runs (for a lease_expiry: unknown tool it would turn UNKNOWN without
	// the tool ever running).
	claimCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeCallTimeout)
	defer cancel()
	req := s.claimRequest(st)
	s.settlePending(ctx, req.Scope)
	st.decision, st.claimErr = s.store.Claim(claimCtx, req)
	st.newApproval = nil
	if st.claimErr == nil && isNewApproval(req, st.decision) {
		st.newApproval = st.decision.Approval // notify.go and receipt.go tell of it
	}
}

// answer is the answer stage: it acts on the claim's last store decision
// (claimed: on to run with the claim's lease and an in-flight slot; a
// record's approval pending, denied or expired: on to the approval stage
// in st.approvalOutcome; replay, in progress, reused key, step conflict,
// UNKNOWN: the call ends; store_unavailable when the store could not
// decide). A call with no record passes by.
func (s *Engine) answer(ctx context.Context, st *callState) bool {
	if st.unprotected != 0 {
		return false // nothing was claimed: run.go runs it as it is
	}
	if st.claimErr != nil {
		s.log.ErrorContext(ctx, "store claim failed", "tool", st.call.Entry.Spec.Name, "error", st.claimErr)
		return st.end(storeUnavailable("the idempotency store is unreachable; the tool was not run"))
	}
	return s.answerDecision(ctx, st)
}

// answerDecision acts on the store's decision: take the claimed call on
// to run, or end it with the replay, the duplicate in flight, the reused
// key, the step conflict, the UNKNOWN record.
func (s *Engine) answerDecision(ctx context.Context, st *callState) bool {
	d := &st.decision
	c, name := st.call, st.call.Entry.Spec.Name
	switch d.Outcome {
	case idempotency.OutcomeClaimed:
		if stale(st, *d) {
			// Approved under other rules or another definition of the
			// tool: void. Releasing the claim removes the record, so the
			// next call asks for a new approval under the rules of now.
			s.giveBackClaim(ctx, d.Lease)
			s.log.WarnContext(ctx, "approval void: the tool's rules or definition changed since it was asked", "tool", name,
				"approval_id", d.Approval.ID)
			p := NewProblem(wire.CodeApprovalStale, "the tool's decide rules or definition changed since this call was approved; the approval is void and nothing ran. Make the same call again to ask for a new approval")
			p.ApprovalID = d.Approval.ID
			return st.refuse(p)
		}
		if d.TakenOver {
			s.metrics.takeovers.WithLabelValues(name).Inc()
			s.log.WarnContext(ctx, "took over an expired lease; running the tool again", "tool", name, "execution_id", d.Lease.ExecutionID)
		}
		leaveSlot, p := s.takeSlot(ctx, c, d.Lease.ExecutionID)
		if p != nil {
			s.giveBackClaim(ctx, d.Lease)
			return st.refuse(p)
		}
		st.lease, st.leaveSlot = d.Lease, leaveSlot
		st.lease.KeepArguments = s.settings.Load().keepArguments // for Complete: policy replay
		if d.Approval == nil && !d.TakenOver {
			s.metrics.countDecision(st) // counted once, at its fresh claim
		}
		s.budgetReserved(st, d.TakenOver) // budgetreceipts.go
		if d.Approval != nil {
			s.log.InfoContext(ctx, "approved call consumed its approval", "tool", name, "approval_id", d.Approval.ID,
				"approved_by", d.Approval.DecidedBy, "execution_id", d.Lease.ExecutionID)
		}
		return false
	case idempotency.OutcomeReplay:
		return st.end(Result{Kind: ResultReplayed, Status: d.Response.Status, ContentType: d.Response.ContentType, Body: d.Response.Body,
			ExecutionID: d.ExecutionID, Replayed: true, EffectReplayed: d.ByEffect, Label: labelReplayed})
	case idempotency.OutcomeEffectConflict:
		return st.refuse(effectConflict(d.EffectHolder))
	case idempotency.OutcomeBudgetExceeded:
		return st.refuse(s.budgetExceeded(d.Budget))
	case idempotency.OutcomeInProgress:
		p := NewProblem(wire.CodeRequestInProgress, "a request with this key is still running; retry after Retry-After seconds, or send Prefer: wait=N").
			WithRetryAfter(min(ceilSeconds(d.RetryAfter), maxInProgressRetryAfter))
		return st.end(Result{Kind: ResultInProgress, Problem: p, Label: labelInProgress})
	case idempotency.OutcomeKeyReused:
		return st.refuse(NewProblem(wire.CodeIdempotencyKeyReused, "this Idempotency-Key was first used with other arguments"))
	case idempotency.OutcomeStepConflict:
		return st.refuse(stepConflict(st.id, d.Conflict))
	case idempotency.OutcomeUnknown:
		p := NewProblem(wire.CodeOutcomeUnknown, "the outcome of this call is unknown (its gateway died or its tool gave no certain answer); an operator must check the side effect and resolve the record")
		return st.end(Result{Kind: ResultUnknown, Problem: p, Label: labelOutcomeUnknown})
	case idempotency.OutcomeAwaitingApproval, idempotency.OutcomeApprovalDenied, idempotency.OutcomeApprovalExpired:
		if st.newApproval != nil {
			s.metrics.countDecision(st) // counted once, at its new approval
		}
		st.approvalOutcome = true // the approval stage answers it (decide.go)
		return false
	default:
		s.log.ErrorContext(ctx, "store returned an invalid decision", "tool", name, "outcome", d.Outcome.String())
		return st.end(storeUnavailable("the idempotency store gave an invalid answer"))
	}
}

// stale says whether the claim d consumed an approval asked under another
// binding (binding.go) than the call's of now.
func stale(st *callState, d idempotency.Decision) bool {
	return d.Approval != nil && d.Approval.Binding != "" && st.approval != nil && d.Approval.Binding != st.approval.Binding
}

// stepConflict is the refusal of a call whose step (or host call id)
// already made another call; conflict, when the store names it, is that
// earlier call.
func stepConflict(id Identity, conflict *idempotency.StepHolder) *Problem {
	if id.HostMeta != "" { // the host id's entry holds other arguments
		return NewProblem(wire.CodeIdempotencyKeyReused, "this host call id ("+id.HostMeta+") was first used with other arguments")
	}
	p := NewProblem(wire.CodeStepConflict, "this session step already made another call; give each tool call its own step index")
	if conflict != nil {
		p.Tool, p.ExecutionID = conflict.Tool, conflict.ExecutionID
	}
	return p
}

// storeUnavailable is the fail-closed answer when the store cannot decide.
func storeUnavailable(detail string) Result {
	return problemResult(NewProblem(wire.CodeStoreUnavailable, detail).WithRetryAfter(1))
}

// maxInProgressRetryAfter caps the Retry-After of request_in_progress. The
// remaining lease is only an upper bound (a live owner renews it and may
// finish any moment), so a client should not be sent away for all of it.
const maxInProgressRetryAfter = 5

// claimRequest builds the store request with a fresh execution id (used
// only if the claim succeeds).
func (s *Engine) claimRequest(st *callState) idempotency.ClaimRequest {
	req := idempotency.ClaimRequest{
		Scope:       idempotency.Scope{Tenant: st.call.Tenant, Tool: st.call.Entry.Spec.Name, Key: st.id.Key},
		Fingerprint: st.fingerprint,
		StepGuard:   !s.opts.StepGuardOff,
		// In derived mode the key is a hash of the session and step.
		StepBoundKey: s.opts.KeyMode == KeyModeDerived,
		ExecutionID:  newULID(),
		Owner:        st.owner,
		LockTTL:      s.opts.LockTTL,
		ReplayTTL:    st.policy.ReplayTTL,
		LeaseExpiry:  st.policy.LeaseExpiry,

		CanonicalArguments: st.canonical,
		Approval:           st.approval,
		Effect:             st.effect,
		Charges:            st.charges,
		Requester:          st.call.Requester.ID,
		Identity:           recordIdentity(st.id),
	}
	if st.call.Entry.Spec.Transactional {
		req.LeaseExpiry = idempotency.LeaseExpiryRerun // see txcall.go
	}
	if st.id.HasStep {
		req.Step = &idempotency.Step{SessionID: st.id.SessionID, Index: st.id.StepIndex}
	}
	if p := st.id.FingerprintPrincipal; p != "" {
		// The record's session names the person (contract section 21);
		// there is no step, so no guard. The key is derived from the
		// principal, so it always comes with this session.
		req.Step = &idempotency.Step{SessionID: wire.FingerprintSessionPrefix + p}
		req.StepGuard, req.StepBoundKey = false, true
	}
	if st.id.HostMeta != "" {
		// The host id's own entry (identity.go), always guarded: it is how
		// the same host id with other arguments is found. The key is
		// derived from the host id, so it is bound to that entry.
		session, index := hostCallStep(st.id.HostMeta, st.id.HostCallID, st.call.Entry.Spec.Name)
		req.Step = &idempotency.Step{SessionID: session, Index: index}
		req.StepGuard, req.StepBoundKey = true, true
	}
	return req
}

// budgetExceeded is the refusal of a call whose charge would take a
// budget over its limit.
func (s *Engine) budgetExceeded(over *idempotency.BudgetExceeded) *Problem {
	p := NewProblem(wire.CodeBudgetExceeded, "this call would take a budget over its limit; it was not run")
	if over != nil {
		remaining := budgets.Amount(over.Remaining)
		p.Budget, p.Remaining = over.Budget, &remaining
		if at := s.settings.Load().budgets.ResetsAt(over.Budget, time.Now()); !at.IsZero() {
			p.ResetsAt = at.UTC().Format(time.RFC3339)
		}
	}
	return p
}
