package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// Claim decides the request with one call of the schema's claim function
// (see schema.go): lookup, step guard, fencing and the write are one
// statement, under row locks.
func (s *Store) Claim(ctx context.Context, req idempotency.ClaimRequest) (idempotency.Decision, error) {
	if err := req.Validate(); err != nil {
		return idempotency.Decision{}, fmt.Errorf("pgstore: claim %s: %w", req.Scope, err)
	}
	var session *string
	var index *int64
	if req.Step != nil {
		i, err := stepIndex(*req.Step)
		if err != nil {
			return idempotency.Decision{}, fmt.Errorf("pgstore: claim %s: %w", req.Scope, err)
		}
		session, index = &req.Step.SessionID, &i
	}
	if err := s.ready(ctx); err != nil {
		return idempotency.Decision{}, fmt.Errorf("pgstore: claim %s: %w", req.Scope, err)
	}
	var (
		outcome             string
		execID, contentType *string
		holderTool          *string
		fence, remaining    *int64
		takenOver           bool
		status              *int32
		body                []byte
		approval            scannedApproval
		useUS               *int64
		holder              effectHolder
	)
	args := append([]any{req.Scope.Tenant, req.Scope.Tool, req.Scope.Key, req.Fingerprint,
		req.ExecutionID, req.Owner, micros(req.LockTTL), micros(req.ReplayTTL),
		string(req.LeaseExpiry), req.StepGuard, session, index, arguments(req.CanonicalArguments)},
		append(append(approvalArgs(req.Approval), effectArg(req.Effect)), principalArgs(req)...)...)
	dest := append([]any{&outcome, &execID, &fence, &takenOver, &remaining, &status, &contentType, &body, &holderTool},
		append(append(approval.dest(), &useUS), holder.dest()...)...)
	statement := s.sql.claim
	if len(req.Charges) > 0 {
		charges, err := chargesArg(req.Charges)
		if err != nil {
			return idempotency.Decision{}, fmt.Errorf("pgstore: claim %s: %w", req.Scope, err)
		}
		var charged *bool
		statement, args, dest = s.sql.claimCharged, append(args, charges), append(dest, &charged)
	}
	err := s.queryClaim(ctx, req, statement, args, dest) // identity.go
	if over := budgetExceeded(err); over != nil {
		return idempotency.Decision{Outcome: idempotency.OutcomeBudgetExceeded, Budget: over}, nil
	}
	if err != nil {
		return idempotency.Decision{}, fmt.Errorf("pgstore: claim %s: %w", req.Scope, err)
	}
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	d := idempotency.Decision{ExecutionID: str(execID), ByEffect: holder.byEffect != nil && *holder.byEffect}
	d.Approval = approval.approval(useUS)
	if o, ok := approvalOutcomes[outcome]; ok {
		d.Outcome = o
		if o != idempotency.OutcomeAwaitingApproval {
			d.ExecutionID = ""
		}
		return d, nil
	}
	switch outcome {
	case "claimed":
		if fence == nil {
			return idempotency.Decision{}, fmt.Errorf("pgstore: claim %s: %w: claimed without a fencing token", req.Scope, errBadReply)
		}
		d.Outcome, d.TakenOver = idempotency.OutcomeClaimed, takenOver
		d.Lease = idempotency.Lease{Scope: req.Scope, Owner: req.Owner, FencingToken: *fence, ExecutionID: d.ExecutionID}
		if req.Step != nil {
			step := *req.Step
			d.Lease.Step = &step
		}
		if d.ByEffect { // a takeover of the effect's holder: its record
			d.Lease.Scope.Key, d.Lease.Step = str(holder.key), holder.step()
		}
	case "replay":
		if status == nil {
			return idempotency.Decision{}, fmt.Errorf("pgstore: claim %s: %w: replay without a status", req.Scope, errBadReply)
		}
		d.Outcome = idempotency.OutcomeReplay
		d.Response = &idempotency.StoredResponse{Status: int(*status), ContentType: str(contentType), Body: body}
	case "in_progress":
		d.Outcome = idempotency.OutcomeInProgress
		if remaining != nil {
			d.RetryAfter = time.Duration(*remaining) * time.Microsecond
		}
	case "key_reused":
		d = idempotency.Decision{Outcome: idempotency.OutcomeKeyReused}
	case "unknown":
		d.Outcome = idempotency.OutcomeUnknown
	case "effect_conflict":
		d = idempotency.Decision{Outcome: idempotency.OutcomeEffectConflict,
			EffectHolder: &idempotency.EffectHolder{ExecutionID: str(execID), State: idempotency.State(str(holder.state))}}
	case "step_conflict":
		d = idempotency.Decision{Outcome: idempotency.OutcomeStepConflict,
			Conflict: &idempotency.StepHolder{Tool: str(holderTool), ExecutionID: str(execID)}}
	default:
		return idempotency.Decision{}, fmt.Errorf("pgstore: claim %s: %w: outcome %q", req.Scope, errBadReply, outcome)
	}
	return d, nil
}

var errBadReply = errors.New("unexpected answer of the claim function")

// arguments is the canonical arguments for the text column: NULL when the
// call brought none.
func arguments(canonical []byte) *string {
	if canonical == nil {
		return nil
	}
	text := string(canonical)
	return &text
}
