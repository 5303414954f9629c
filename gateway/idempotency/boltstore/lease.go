package boltstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// Renew extends the lease to ttl from now if the caller still owns the
// record, else idempotency.ErrLeaseLost.
func (s *Store) Renew(ctx context.Context, lease idempotency.Lease, ttl time.Duration) error {
	if ttl <= 0 {
		return errors.New("boltstore: renew: ttl must be positive")
	}
	return s.withOwnedRecord(ctx, "renew", lease, func(t *txn, key []byte, r *storedRecord) error {
		r.LeaseUntil = t.now.Add(ttl).UnixNano()
		r.ExpiresAt = r.LeaseUntil + r.ReplayTTL
		return t.putRecord(key, r)
	})
}

// Complete stores resp as COMPLETED for ttl if the caller still owns the
// record, else idempotency.ErrLeaseLost and nothing changes.
func (s *Store) Complete(ctx context.Context, lease idempotency.Lease, resp idempotency.StoredResponse, ttl time.Duration) error {
	if ttl <= 0 {
		return errors.New("boltstore: complete: ttl must be positive")
	}
	return s.withOwnedRecord(ctx, "complete", lease, func(t *txn, key []byte, r *storedRecord) error {
		r.State = string(idempotency.StateCompleted)
		r.Owner = ""
		if !lease.KeepArguments {
			r.Arguments = ""
		}
		r.LeaseUntil = 0
		r.ReplayTTL = 0
		r.ExpiresAt = t.now.Add(ttl).UnixNano()
		r.Response = &storedResponse{Status: resp.Status, ContentType: resp.ContentType, Body: resp.Body}
		if err := t.markPending(lease, resp.Status); err != nil {
			return err
		}
		return t.putRecord(key, r)
	})
}

// MarkUnknown turns the caller's IN_PROGRESS record UNKNOWN for ttl if the
// caller still owns it (an expired lease nobody took over included), else
// idempotency.ErrLeaseLost and nothing changes. The step entry follows the
// record (it is found through the record, which keeps its step).
func (s *Store) MarkUnknown(ctx context.Context, lease idempotency.Lease, ttl time.Duration) error {
	if ttl <= 0 {
		return errors.New("boltstore: mark unknown: ttl must be positive")
	}
	return s.withOwnedRecord(ctx, "mark unknown", lease, func(t *txn, key []byte, r *storedRecord) error {
		r.State = string(idempotency.StateUnknown)
		r.Owner = ""
		r.LeaseUntil = 0
		r.ReplayTTL = 0
		r.ExpiresAt = t.now.Add(ttl).UnixNano()
		return t.putRecord(key, r)
	})
}

// Release deletes the record and frees its step if the caller still owns
// it, so a retry runs the tool again; else idempotency.ErrLeaseLost.
func (s *Store) Release(ctx context.Context, lease idempotency.Lease) error {
	return s.withOwnedRecord(ctx, "release", lease, func(t *txn, key []byte, r *storedRecord) error {
		if err := t.releaseCharges(key, r); err != nil {
			return err
		}
		return t.deleteRecord(key, r)
	})
}

// withOwnedRecord runs change in one write transaction if lease is still
// the record's current claim (the fencing check), else returns
// idempotency.ErrLeaseLost without writing.
func (s *Store) withOwnedRecord(ctx context.Context, op string, lease idempotency.Lease, change func(t *txn, key []byte, r *storedRecord) error) error {
	var lost bool
	err := s.write(ctx, func(t *txn) error {
		key := scopeKey(lease.Scope)
		r, err := t.liveRecord(key)
		if err != nil {
			return err
		}
		// A lost lease is an answer, not a failure of the batch.
		lost = r == nil || !r.ownedBy(lease)
		if lost {
			return nil
		}
		return change(t, key, r)
	})
	if err == nil && lost {
		err = idempotency.ErrLeaseLost
	}
	if err != nil {
		return fmt.Errorf("boltstore: %s: %w", op, err)
	}
	return nil
}

// remaining is the time left until the Unix-nanosecond instant until.
func (t *txn) remaining(until int64) time.Duration {
	return time.Duration(until - t.now.UnixNano())
}
