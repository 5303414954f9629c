package idempotency

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// The receipt outbox: with receipts on, a store that keeps one records
// "executed receipt pending" for an execution in the completion's own
// atomic step (Complete, a TxCall's Complete), so a receipt still queued
// in a gateway that is killed is not lost: the receipt writer clears the
// entry once the receipt is appended, and a recovery sweep in every
// gateway appends the receipt of an entry older than a grace period
// (receipts deduplicate executions, so it never lands twice) and clears
// it. See docs/receipts.md.

// OutboxRef names one execution's outbox entry: what the stores need to
// find it (the scope and step name its Redis slot).
type OutboxRef struct {
	Scope       Scope
	Step        *Step
	ExecutionID string
}

// PendingReceipt is an outbox entry: what the completion knew of the
// executed call, enough to rebuild its receipt.
type PendingReceipt struct {
	OutboxRef
	// Status is the stored response's status.
	Status int
	// CompletedAt is when the completion was written (the gateway's clock).
	CompletedAt time.Time
}

// ReceiptOutbox is implemented by the stores that keep the outbox (Redis
// and PostgreSQL, when built with their receipt outbox option on).
type ReceiptOutbox interface {
	// PendingReceipts returns at most limit entries completed before
	// before.
	PendingReceipts(ctx context.Context, before time.Time, limit int) ([]PendingReceipt, error)
	// ClearReceipts removes the entries of refs (one store round trip);
	// an entry already gone is no error.
	ClearReceipts(ctx context.Context, refs []OutboxRef) error
}

// outboxEntry is the stored form of a PendingReceipt (JSON; the execution
// id is the entry's name in every store).
type outboxEntry struct {
	Tenant  string  `json:"tenant"`
	Tool    string  `json:"tool"`
	Key     string  `json:"key"`
	Session string  `json:"session,omitempty"`
	Step    *uint64 `json:"step,omitempty"`
	Status  int     `json:"status"`
	AtMS    int64   `json:"at_ms"`
}

// EncodeOutboxEntry is the stored form of the entry of lease's completion
// with status at at: what the stores write beside the record.
func EncodeOutboxEntry(lease Lease, status int, at time.Time) []byte {
	e := outboxEntry{Tenant: lease.Scope.Tenant, Tool: lease.Scope.Tool, Key: lease.Scope.Key, Status: status, AtMS: at.UnixMilli()}
	if lease.Step != nil {
		e.Session, e.Step = lease.Step.SessionID, &lease.Step.Index
	}
	b, _ := json.Marshal(e) // strings and integers only: cannot fail
	return b
}

// DecodeOutboxEntry reads an entry the stores wrote for executionID.
func DecodeOutboxEntry(executionID string, b []byte) (PendingReceipt, error) {
	var e outboxEntry
	if err := json.Unmarshal(b, &e); err != nil {
		return PendingReceipt{}, fmt.Errorf("idempotency: outbox entry of %s: %w", executionID, err)
	}
	p := PendingReceipt{
		OutboxRef: OutboxRef{Scope: Scope{Tenant: e.Tenant, Tool: e.Tool, Key: e.Key}, ExecutionID: executionID},
		Status:    e.Status, CompletedAt: time.UnixMilli(e.AtMS),
	}
	if e.Step != nil {
		p.Step = &Step{SessionID: e.Session, Index: *e.Step}
	}
	return p, nil
}
