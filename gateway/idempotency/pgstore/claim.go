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
	var row claimRow
	args := append([]any{req.Scope.Tenant, req.Scope.Tool, req.Scope.Key, req.Fingerprint,
		req.ExecutionID, req.Owner, micros(req.LockTTL), micros(req.ReplayTTL),
		string(req.LeaseExpiry), req.StepGuard, session, index, arguments(req.CanonicalArguments)},
		append(append(approvalArgs(req.Approval), effectArg(req.Effect)), principalArgs(req)...)...)
	dest := row.dest()
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
	return row.decision(req)
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

// claimRow is the claim function's row (claimColumns), as Claim scans it.
type claimRow struct {
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
}

// dest is where the row is scanned, in claimColumns' order.
func (r *claimRow) dest() []any {
	return append([]any{&r.outcome, &r.execID, &r.fence, &r.takenOver, &r.remaining, &r.status, &r.contentType, &r.body, &r.holderTool},
		append(append(r.approval.dest(), &r.useUS), r.holder.dest()...)...)
}

// decision is the store's decision the row tells of req.
func (r *claimRow) decision(req idempotency.ClaimRequest) (idempotency.Decision, error) {
	d := idempotency.Decision{ExecutionID: str(r.execID), ByEffect: r.holder.byEffect != nil && *r.holder.byEffect}
	d.Approval = r.approval.approval(r.useUS)
	if o, ok := approvalOutcomes[r.outcome]; ok {
		d.Outcome = o
		if o != idempotency.OutcomeAwaitingApproval {
			d.ExecutionID = ""
		}
		return d, nil
	}
	switch r.outcome {
	case "claimed":
		if r.fence == nil {
			return idempotency.Decision{}, fmt.Errorf("pgstore: claim %s: %w: claimed without a fencing token", req.Scope, errBadReply)
		}
		d.Outcome, d.TakenOver = idempotency.OutcomeClaimed, r.takenOver
		d.Lease = idempotency.Lease{Scope: req.Scope, Owner: req.Owner, FencingToken: *r.fence, ExecutionID: d.ExecutionID}
		if req.Step != nil {
			step := *req.Step
			d.Lease.Step = &step
		}
		if d.ByEffect { // a takeover of the effect's holder: its record
			d.Lease.Scope.Key, d.Lease.Step = str(r.holder.key), r.holder.step()
		}
	case "replay":
		if r.status == nil {
			return idempotency.Decision{}, fmt.Errorf("pgstore: claim %s: %w: replay without a status", req.Scope, errBadReply)
		}
		d.Outcome = idempotency.OutcomeReplay
		d.Response = &idempotency.StoredResponse{Status: int(*r.status), ContentType: str(r.contentType), Body: r.body}
	case "in_progress":
		d.Outcome = idempotency.OutcomeInProgress
		if r.remaining != nil {
			d.RetryAfter = time.Duration(*r.remaining) * time.Microsecond
		}
	case "key_reused":
		d = idempotency.Decision{Outcome: idempotency.OutcomeKeyReused}
	case "unknown":
		d.Outcome = idempotency.OutcomeUnknown
	case "effect_conflict":
		d = idempotency.Decision{Outcome: idempotency.OutcomeEffectConflict,
			EffectHolder: &idempotency.EffectHolder{ExecutionID: str(r.execID), State: idempotency.State(str(r.holder.state))}}
	case "step_conflict":
		d = idempotency.Decision{Outcome: idempotency.OutcomeStepConflict,
			Conflict: &idempotency.StepHolder{Tool: str(r.holderTool), ExecutionID: str(r.execID)}}
	default:
		return idempotency.Decision{}, fmt.Errorf("pgstore: claim %s: %w: outcome %q", req.Scope, errBadReply, r.outcome)
	}
	return d, nil
}

// str is *p, or "" for a NULL.
func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
