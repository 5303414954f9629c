package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// The receipt outbox (idempotency.ReceiptOutbox): with
// Options.ReceiptOutbox, complete.lua also writes the execution's entry
// into the outbox hash (keys.go: one key on a single Redis, the record's
// tag on a Cluster, so the entry is written in the record's own atomic
// step). The receipt writer deletes the entries of the receipts it
// appended; the recovery sweep reads the old ones.

// outboxScanCount is the COUNT hint of the sweep's SCAN and HSCAN: the
// outbox holds only the receipts not written yet, normally few.
const outboxScanCount = 500

var _ idempotency.ReceiptOutbox = (*Store)(nil)

// PendingReceipts implements idempotency.ReceiptOutbox: HSCAN of the
// outbox (on a Cluster, of every master's outbox keys), keeping the
// entries completed before before.
func (s *Store) PendingReceipts(ctx context.Context, before time.Time, limit int) ([]idempotency.PendingReceipt, error) {
	if err := s.ready(ctx); err != nil {
		return nil, fmt.Errorf("redisstore: pending receipts: %w", err)
	}
	nodes, err := s.scanNodes(ctx)
	if err != nil {
		return nil, fmt.Errorf("redisstore: pending receipts: %w", err)
	}
	var pending []idempotency.PendingReceipt
	for _, node := range nodes {
		keys, err := s.outboxKeys(ctx, node)
		if err != nil {
			return nil, err
		}
		for _, key := range keys {
			if pending, err = s.pendingIn(ctx, node, key, before, limit, pending); err != nil || len(pending) >= limit {
				return pending, err
			}
		}
	}
	return pending, nil
}

// outboxKeys are the outbox keys on node.
func (s *Store) outboxKeys(ctx context.Context, node *redis.Client) ([]string, error) {
	if !s.keys.sessionSlots {
		return []string{s.keys.outbox(idempotency.Scope{}, nil)}, nil
	}
	var keys []string
	iter := node.Scan(ctx, 0, s.keys.outboxPattern(), outboxScanCount).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return nil, fmt.Errorf("redisstore: pending receipts: scan: %w", err)
	}
	return keys, nil
}

// pendingIn adds to pending the entries of the outbox key completed
// before before, until pending holds limit.
func (s *Store) pendingIn(ctx context.Context, node *redis.Client, key string, before time.Time, limit int, pending []idempotency.PendingReceipt) ([]idempotency.PendingReceipt, error) {
	iter := node.HScan(ctx, key, 0, "", outboxScanCount).Iterator()
	for len(pending) < limit && iter.Next(ctx) {
		exec := iter.Val()
		if !iter.Next(ctx) {
			break
		}
		p, err := idempotency.DecodeOutboxEntry(exec, []byte(iter.Val()))
		if err != nil {
			return pending, err
		}
		if p.CompletedAt.Before(before) {
			pending = append(pending, p)
		}
	}
	if err := iter.Err(); err != nil {
		return pending, fmt.Errorf("redisstore: pending receipts: hscan: %w", err)
	}
	return pending, nil
}

// ClearReceipts implements idempotency.ReceiptOutbox: one HDEL per
// outbox key, in one pipeline.
func (s *Store) ClearReceipts(ctx context.Context, refs []idempotency.OutboxRef) error {
	if len(refs) == 0 {
		return nil
	}
	byKey := map[string][]string{}
	for _, r := range refs {
		key := s.keys.outbox(r.Scope, r.Step)
		byKey[key] = append(byKey[key], r.ExecutionID)
	}
	_, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for key, execs := range byKey {
			p.HDel(ctx, key, execs...)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("redisstore: clear %d receipts: %w", len(refs), err)
	}
	return nil
}
