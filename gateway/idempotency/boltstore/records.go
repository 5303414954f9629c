package boltstore

import (
	"context"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// Get returns the live record under scope, or idempotency.ErrNotFound.
func (s *Store) Get(ctx context.Context, scope idempotency.Scope) (idempotency.Record, error) {
	return s.viewRecord(ctx, "get", func(t *txn) (*storedRecord, error) { return t.liveRecord(scopeKey(scope)) })
}

// viewRecord returns the live record find finds in a read transaction, or
// idempotency.ErrNotFound; op names the operation in errors.
func (s *Store) viewRecord(ctx context.Context, op string, find func(t *txn) (*storedRecord, error)) (idempotency.Record, error) {
	if err := ctx.Err(); err != nil {
		return idempotency.Record{}, err
	}
	var rec idempotency.Record
	err := s.db.View(func(tx *bolt.Tx) error {
		t, err := newTxn(tx, s.now())
		if err != nil {
			return err
		}
		r, err := find(t)
		if err != nil {
			return err
		}
		if r == nil {
			return idempotency.ErrNotFound
		}
		rec = t.view(r)
		return nil
	})
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("boltstore: %s: %w", op, err)
	}
	return rec, nil
}

// Delete removes the live record under scope and frees its step, or
// returns idempotency.ErrNotFound. The scope's fencing counter stays, so a
// later claim still gets a larger token.
func (s *Store) Delete(ctx context.Context, scope idempotency.Scope) error {
	var missing bool
	err := s.write(ctx, func(t *txn) error {
		key := scopeKey(scope)
		r, err := t.liveRecord(key)
		if err != nil {
			return err
		}
		// A missing record is an answer, not a failure of the batch.
		missing = r == nil
		if missing {
			return nil
		}
		if err := t.releaseCharges(key, r); err != nil {
			return err
		}
		return t.deleteRecord(key, r)
	})
	if err == nil && missing {
		err = idempotency.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("boltstore: delete: %w", err)
	}
	return nil
}
