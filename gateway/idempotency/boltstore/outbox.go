package boltstore

import (
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// The receipt outbox (idempotency.ReceiptOutbox): with
// Options.ReceiptOutbox, Complete also writes the execution's entry into
// the bucket receipt_outbox (execution id → entry) in the completion's
// own transaction. The gateway's writer deletes the entries of the
// receipts it appended; what a crash left is recovered at the next
// start's sweeps (one process owns the file).

// outboxBucket holds the receipt outbox (part of layout 4, created by
// Open when the outbox is on).
var outboxBucket = []byte("receipt_outbox")

var _ idempotency.ReceiptOutbox = (*Store)(nil)

// markPending writes lease's outbox entry in t (outbox on).
func (t *txn) markPending(lease idempotency.Lease, status int) error {
	if t.outbox == nil {
		return nil
	}
	return t.outbox.Put([]byte(lease.ExecutionID), idempotency.EncodeOutboxEntry(lease, status, t.now))
}

// PendingReceipts implements idempotency.ReceiptOutbox: one read
// transaction over the outbox bucket.
func (s *Store) PendingReceipts(ctx context.Context, before time.Time, limit int) ([]idempotency.PendingReceipt, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var pending []idempotency.PendingReceipt
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(outboxBucket)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, v := c.First(); k != nil && len(pending) < limit; k, v = c.Next() {
			p, err := idempotency.DecodeOutboxEntry(string(k), v)
			if err != nil {
				return err
			}
			if p.CompletedAt.Before(before) {
				pending = append(pending, p)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("boltstore: pending receipts: %w", err)
	}
	return pending, nil
}

// ClearReceipts implements idempotency.ReceiptOutbox: one (batched)
// write transaction.
func (s *Store) ClearReceipts(ctx context.Context, refs []idempotency.OutboxRef) error {
	if len(refs) == 0 {
		return nil
	}
	err := s.write(ctx, func(t *txn) error {
		if t.outbox == nil {
			return nil
		}
		for _, r := range refs {
			if err := t.outbox.Delete([]byte(r.ExecutionID)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("boltstore: clear %d receipts: %w", len(refs), err)
	}
	return nil
}
