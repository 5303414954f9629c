package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// The receipt outbox (idempotency.ReceiptOutbox): with Options.ReceiptOutbox,
// Complete and a transactional call's Complete also write the execution's
// row of receipt_outbox, in the statement that completes the record. The
// receipt writer deletes the rows of the receipts it appended; the
// recovery sweep reads the old ones.

// outboxMigration creates the outbox table (part of version 8).
const outboxMigration = `
CREATE TABLE IF NOT EXISTS @.receipt_outbox (
	execution_id text PRIMARY KEY,
	completed_at timestamptz NOT NULL,
	entry        text NOT NULL
);
CREATE INDEX IF NOT EXISTS receipt_outbox_completed ON @.receipt_outbox (completed_at);
`

var _ idempotency.ReceiptOutbox = (*Store)(nil)

// completion is the statement and arguments of lease's completion: with
// the outbox on, the one that also writes its entry.
func (s *Store) completion(lease idempotency.Lease, resp idempotency.StoredResponse, ttl time.Duration) (string, []any) {
	args := completeArgs(lease, resp, ttl)
	if !s.receiptOutbox {
		return s.sql.complete, args
	}
	now := time.Now()
	return s.sql.completeOutbox, append(args, string(idempotency.EncodeOutboxEntry(lease, resp.Status, now)), now)
}

// PendingReceipts implements idempotency.ReceiptOutbox.
func (s *Store) PendingReceipts(ctx context.Context, before time.Time, limit int) ([]idempotency.PendingReceipt, error) {
	if err := s.ready(ctx); err != nil {
		return nil, fmt.Errorf("pgstore: pending receipts: %w", err)
	}
	rows, err := s.pool.Query(ctx, s.sql.pendingReceipts, before, limit)
	if err != nil {
		return nil, fmt.Errorf("pgstore: pending receipts: %w", err)
	}
	type row struct {
		ExecutionID string
		Entry       string
	}
	read, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	if err != nil {
		return nil, fmt.Errorf("pgstore: pending receipts: %w", err)
	}
	pending := make([]idempotency.PendingReceipt, 0, len(read))
	for _, r := range read {
		p, err := idempotency.DecodeOutboxEntry(r.ExecutionID, []byte(r.Entry))
		if err != nil {
			return nil, err
		}
		pending = append(pending, p)
	}
	return pending, nil
}

// ClearReceipts implements idempotency.ReceiptOutbox: one DELETE.
func (s *Store) ClearReceipts(ctx context.Context, refs []idempotency.OutboxRef) error {
	if len(refs) == 0 {
		return nil
	}
	ids := make([]string, len(refs))
	for i, r := range refs {
		ids[i] = r.ExecutionID
	}
	if err := s.ready(ctx); err != nil {
		return fmt.Errorf("pgstore: clear receipts: %w", err)
	}
	if _, err := s.pool.Exec(ctx, s.sql.clearReceipts, ids); err != nil {
		return fmt.Errorf("pgstore: clear %d receipts: %w", len(ids), err)
	}
	return nil
}
