package boltstore

import (
	"context"
	"errors"
	"fmt"

	berrors "go.etcd.io/bbolt/errors"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// Claim looks up the record, decides and writes in one write transaction
// (see idempotency.Store.Claim for the decision order). An empty
// LeaseExpiry means rerun, the contract's default.
func (s *Store) Claim(ctx context.Context, req idempotency.ClaimRequest) (idempotency.Decision, error) {
	if err := validateClaim(req); err != nil {
		return idempotency.Decision{}, err
	}
	if err := ctx.Err(); err != nil {
		return idempotency.Decision{}, fmt.Errorf("boltstore: claim: %w", err)
	}
	// Most answers that write nothing come from a snapshot, without
	// waiting for a write batch. A decision that has to write fails there
	// with ErrTxNotWritable and is taken again in a write transaction,
	// where the record may have changed since.
	var decision idempotency.Decision
	done, err := s.readDurable(func(t *txn) error {
		var err error
		decision, _, err = t.claim(req)
		return err
	})
	if done && err == nil {
		return decision, nil
	}
	if err != nil && !errors.Is(err, berrors.ErrTxNotWritable) {
		return idempotency.Decision{}, fmt.Errorf("boltstore: claim: %w", err)
	}
	err = s.write(ctx, func(t *txn) error {
		var err error
		decision, _, err = t.claim(req)
		return err
	})
	if err != nil {
		return idempotency.Decision{}, fmt.Errorf("boltstore: claim: %w", err)
	}
	return decision, nil
}

func validateClaim(req idempotency.ClaimRequest) error {
	if err := req.Validate(); err != nil {
		return fmt.Errorf("boltstore: claim: %w", err)
	}
	return nil
}

// claim is the decision table of idempotency.Store.Claim; it reports
// whether it wrote anything.
func (t *txn) claim(req idempotency.ClaimRequest) (idempotency.Decision, bool, error) {
	key := scopeKey(req.Scope)
	existing, err := t.liveRecord(key)
	if err != nil {
		return idempotency.Decision{}, false, err
	}
	if existing != nil {
		return t.decideExisting(key, existing, req)
	}

	if req.StepGuard && req.Step != nil {
		holder, err := t.stepHolder(req.Scope.Tenant, *req.Step, key)
		if err != nil {
			return idempotency.Decision{}, false, err
		}
		if holder != nil {
			return idempotency.Decision{
				Outcome:  idempotency.OutcomeStepConflict,
				Conflict: &idempotency.StepHolder{Tool: holder.Tool, ExecutionID: holder.ExecutionID},
			}, false, nil
		}
	}

	if req.Effect != nil {
		if d, held, err := t.effectHeld(key, req); held || err != nil {
			return d, true, err // the holder's decision may have written (a takeover)
		}
	}

	r := &storedRecord{
		Tenant:      req.Scope.Tenant,
		Tool:        req.Scope.Tool,
		Key:         req.Scope.Key,
		Fingerprint: req.Fingerprint,
		CreatedAt:   t.now.UnixNano(),
		Requester:   req.Requester,
		Identity:    req.Identity,
	}
	if req.Step != nil {
		r.Step = &storedStep{SessionID: req.Step.SessionID, Index: req.Step.Index}
	}
	if req.Effect != nil {
		r.Effect = req.Effect.Value
	}
	if req.Approval == nil && len(req.Charges) > 0 {
		if over, err := t.reserve(key, r, req, true); over != nil || err != nil {
			return idempotency.Decision{Outcome: idempotency.OutcomeBudgetExceeded, Budget: over}, false, err
		}
	}
	if err := t.dropExpiredApproval(key); err != nil {
		return idempotency.Decision{}, false, err
	}
	var decision idempotency.Decision
	if req.Approval != nil {
		decision, err = t.newPending(key, r, req)
	} else {
		decision, err = t.takeLease(key, r, req)
	}
	if err != nil {
		return idempotency.Decision{}, false, err
	}
	if req.Step != nil {
		if err := t.steps.Put(stepKey(req.Scope.Tenant, *req.Step), key); err != nil {
			return idempotency.Decision{}, false, fmt.Errorf("put step entry: %w", err)
		}
	}
	if req.Effect != nil {
		if err := t.effects.Put(effectKey(req.Scope, req.Effect.Value), key); err != nil {
			return idempotency.Decision{}, false, fmt.Errorf("put effect reservation: %w", err)
		}
	}
	return decision, true, nil
}

// decideExisting decides for a live record under the requested key.
func (t *txn) decideExisting(key []byte, r *storedRecord, req idempotency.ClaimRequest) (idempotency.Decision, bool, error) {
	if r.Fingerprint != req.Fingerprint {
		return idempotency.Decision{Outcome: idempotency.OutcomeKeyReused}, false, nil
	}
	switch idempotency.State(r.State) {
	case idempotency.StateCompleted:
		var resp *idempotency.StoredResponse
		if r.Response != nil {
			resp = r.Response.toResponse()
		} else {
			resp = &idempotency.StoredResponse{}
		}
		return idempotency.Decision{
			Outcome:     idempotency.OutcomeReplay,
			ExecutionID: r.ExecutionID,
			Response:    resp,
		}, false, nil
	case idempotency.StateUnknown:
		return idempotency.Decision{Outcome: idempotency.OutcomeUnknown, ExecutionID: r.ExecutionID}, false, nil
	case idempotency.StateInProgress:
	case idempotency.StateAwaitingApproval, idempotency.StateApproved, idempotency.StateDenied:
		return t.decideApproval(key, r, req)
	default:
		return idempotency.Decision{}, false, fmt.Errorf("record in unexpected state %q", r.State)
	}

	// The same claim again (its caller lost the first answer): it already
	// owns the record, so it gets its claim back, not "in progress".
	if r.Owner == req.Owner {
		lease := idempotency.Lease{Scope: req.Scope, Owner: r.Owner, FencingToken: r.Fencing, ExecutionID: r.ExecutionID}
		if req.Step != nil {
			step := *req.Step
			lease.Step = &step
		}
		return idempotency.Decision{Outcome: idempotency.OutcomeClaimed, Lease: lease, ExecutionID: r.ExecutionID}, false, nil
	}

	if r.leaseAlive(t.now) {
		return idempotency.Decision{
			Outcome:     idempotency.OutcomeInProgress,
			ExecutionID: r.ExecutionID,
			RetryAfter:  t.remaining(r.LeaseUntil),
		}, false, nil
	}

	// The owner's lease expired without renewal: its gateway died.
	if req.LeaseExpiry == idempotency.LeaseExpiryUnknown {
		r.State = string(idempotency.StateUnknown)
		r.Owner = ""
		r.LeaseUntil = 0
		r.ReplayTTL = 0
		r.ExpiresAt = t.now.Add(req.ReplayTTL).UnixNano()
		if err := t.putRecord(key, r); err != nil {
			return idempotency.Decision{}, false, err
		}
		return idempotency.Decision{Outcome: idempotency.OutcomeUnknown, ExecutionID: r.ExecutionID}, true, nil
	}
	decision, err := t.takeLease(key, r, req)
	if err != nil {
		return idempotency.Decision{}, false, err
	}
	decision.TakenOver = true
	return decision, true, nil
}

// takeLease makes r an IN_PROGRESS record owned by the caller (a first
// claim or a takeover) and stores it.
func (t *txn) takeLease(key []byte, r *storedRecord, req idempotency.ClaimRequest) (idempotency.Decision, error) {
	token, err := t.nextFencingToken(key, r.Fencing)
	if err != nil {
		return idempotency.Decision{}, err
	}
	r.State = string(idempotency.StateInProgress)
	r.Owner = req.Owner
	r.ExecutionID = req.ExecutionID
	r.Fencing = token
	r.Response = nil
	r.Arguments = string(req.CanonicalArguments)
	r.ReplayTTL = int64(req.ReplayTTL)
	r.LeaseUntil = t.now.Add(req.LockTTL).UnixNano()
	// An expired lease must stay visible for takeover or UNKNOWN, so the
	// record outlives its lease by the replay TTL.
	r.ExpiresAt = r.LeaseUntil + r.ReplayTTL
	if err := t.putRecord(key, r); err != nil {
		return idempotency.Decision{}, err
	}
	return idempotency.Decision{
		Outcome:     idempotency.OutcomeClaimed,
		ExecutionID: r.ExecutionID,
		Lease: idempotency.Lease{
			Scope:        r.scope(),
			Step:         req.Step,
			Owner:        r.Owner,
			FencingToken: token,
			ExecutionID:  r.ExecutionID,
		},
	}, nil
}

// stepHolder returns the live record holding the step under another key
// than ownKey, or nil when the step is free (never bound, or its record is
// gone or expired).
func (t *txn) stepHolder(tenant string, step idempotency.Step, ownKey []byte) (*storedRecord, error) {
	holderKey := t.steps.Get(stepKey(tenant, step))
	if holderKey == nil || string(holderKey) == string(ownKey) {
		return nil, nil
	}
	holder, err := t.liveRecord(holderKey)
	if err != nil || holder == nil {
		return nil, err
	}
	if holder.Step == nil || stepOf(holder.Step) != step {
		return nil, nil
	}
	return holder, nil
}

func stepOf(s *storedStep) idempotency.Step {
	return idempotency.Step{SessionID: s.SessionID, Index: s.Index}
}
