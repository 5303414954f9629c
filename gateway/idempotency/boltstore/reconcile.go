package boltstore

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

var _ idempotency.Reconciler = (*Store)(nil)

// storedReconciliation is a record's reconciliation. Times are Unix
// nanoseconds.
type storedReconciliation struct {
	Owner      string          `json:"o,omitempty"`
	LeaseUntil int64           `json:"l,omitempty"`
	Count      int             `json:"n"`
	Attempts   []storedAttempt `json:"a,omitempty"`
}

type storedAttempt struct {
	At      int64  `json:"t"`
	Outcome string `json:"o"`
	Detail  string `json:"d,omitempty"`
}

func (r *storedReconciliation) toReconciliation() *idempotency.Reconciliation {
	if r == nil {
		return nil
	}
	out := &idempotency.Reconciliation{Owner: r.Owner, Count: r.Count}
	if r.LeaseUntil != 0 {
		out.LeaseUntil = time.Unix(0, r.LeaseUntil)
	}
	for _, a := range r.Attempts {
		out.Attempts = append(out.Attempts, idempotency.ReconcileAttempt{At: time.Unix(0, a.At), Outcome: a.Outcome, Detail: a.Detail})
	}
	return out
}

// ClaimReconcile takes the record's reconcile lease for owner (see
// idempotency.Reconciler), turning an abandoned IN_PROGRESS record UNKNOWN.
func (s *Store) ClaimReconcile(ctx context.Context, scope idempotency.Scope, owner string, ttl time.Duration) (idempotency.Record, error) {
	if owner == "" || ttl <= 0 {
		return idempotency.Record{}, fmt.Errorf("boltstore: claim reconcile %v: owner and a positive ttl are required", scope)
	}
	rec, answer, err := s.updateLive(ctx, scope, func(t *txn, r *storedRecord) error {
		switch {
		case idempotency.State(r.State) == idempotency.StateInProgress && !r.leaseAlive(t.now):
			// Abandoned: nobody took it over; its outcome is uncertain.
			r.State = string(idempotency.StateUnknown)
			r.Owner = ""
			r.LeaseUntil = 0
			r.ExpiresAt = t.now.Add(time.Duration(r.ReplayTTL)).UnixNano()
			r.ReplayTTL = 0
		case idempotency.State(r.State) != idempotency.StateUnknown:
			return idempotency.ErrNotResolvable
		}
		if r.Reconcile == nil {
			r.Reconcile = &storedReconciliation{}
		}
		if r.Reconcile.Owner != "" && r.Reconcile.Owner != owner && t.now.UnixNano() < r.Reconcile.LeaseUntil {
			return idempotency.ErrReconcileHeld
		}
		r.Reconcile.Owner = owner
		r.Reconcile.LeaseUntil = t.now.Add(ttl).UnixNano()
		return nil
	})
	return rec, reconcileResult(err, answer, "claim reconcile", scope)
}

// RecordReconcileAttempt appends attempt to the record's reconciliation.
func (s *Store) RecordReconcileAttempt(ctx context.Context, scope idempotency.Scope, owner string, fencingToken int64, attempt idempotency.ReconcileAttempt) (idempotency.Record, error) {
	var rec idempotency.Record
	err := s.withReconcileLease(ctx, "record reconcile attempt", scope, owner, fencingToken, func(t *txn, key []byte, r *storedRecord) error {
		rc := r.Reconcile
		rc.Count++
		rc.Attempts = append(rc.Attempts, storedAttempt{At: attempt.At.UnixNano(), Outcome: attempt.Outcome, Detail: attempt.Detail})
		if extra := len(rc.Attempts) - idempotency.MaxReconcileAttemptsKept; extra > 0 {
			rc.Attempts = rc.Attempts[extra:]
		}
		rec = r.toRecord()
		return t.putRecord(key, r)
	})
	return rec, err
}

// CompleteReconciled completes the record with resp, resolved by reconcile.
func (s *Store) CompleteReconciled(ctx context.Context, scope idempotency.Scope, owner string, fencingToken int64, resp idempotency.StoredResponse, ttl time.Duration) (idempotency.Record, error) {
	if ttl <= 0 {
		return idempotency.Record{}, fmt.Errorf("boltstore: complete reconciled %v: ttl %v must be positive", scope, ttl)
	}
	var rec idempotency.Record
	err := s.withReconcileLease(ctx, "complete reconciled", scope, owner, fencingToken, func(t *txn, key []byte, r *storedRecord) error {
		r.State = string(idempotency.StateCompleted)
		r.Arguments = ""
		r.ExpiresAt = t.now.Add(ttl).UnixNano()
		r.Response = &storedResponse{Status: resp.Status, ContentType: resp.ContentType, Body: bytes.Clone(resp.Body)}
		r.ResolvedBy = idempotency.ResolvedByReconcile
		r.Reconcile.Owner, r.Reconcile.LeaseUntil = "", 0
		rec = r.toRecord()
		return t.putRecord(key, r)
	})
	return rec, err
}

// DropReconciled deletes the record, so the next call runs the tool.
func (s *Store) DropReconciled(ctx context.Context, scope idempotency.Scope, owner string, fencingToken int64) error {
	return s.withReconcileLease(ctx, "drop reconciled", scope, owner, fencingToken, func(t *txn, key []byte, r *storedRecord) error {
		if err := t.releaseCharges(key, r); err != nil {
			return err
		}
		return t.deleteRecord(key, r)
	})
}

// withReconcileLease runs fn on the record under scope in one write
// transaction if it is UNKNOWN with fencingToken and owner holds its
// reconcile lease; else idempotency.ErrLeaseLost and nothing changes.
func (s *Store) withReconcileLease(ctx context.Context, op string, scope idempotency.Scope, owner string, fencingToken int64, fn func(t *txn, key []byte, r *storedRecord) error) error {
	var answer error
	err := s.write(ctx, func(t *txn) error {
		answer = nil
		key := scopeKey(scope)
		r, err := t.liveRecord(key)
		if err != nil {
			return err
		}
		if r == nil || idempotency.State(r.State) != idempotency.StateUnknown || r.Fencing != fencingToken ||
			r.Reconcile == nil || r.Reconcile.Owner != owner {
			answer = idempotency.ErrLeaseLost
			return nil
		}
		return fn(t, key, r)
	})
	return reconcileResult(err, answer, op, scope)
}

func reconcileResult(err, answer error, op string, scope idempotency.Scope) error {
	if err == nil {
		err = answer
	}
	if err != nil {
		return fmt.Errorf("boltstore: %s %v: %w", op, scope, err)
	}
	return nil
}
