package idempotency

import (
	"context"
	"errors"
	"time"
)

// ErrReconcileHeld: another reconciler holds the record's reconcile lease
// (one replica at a time asks a tool's owner about one record).
var ErrReconcileHeld = errors.New("idempotency: record is being reconciled by another owner")

// ResolvedByReconcile is Record.ResolvedBy of a record that reconciliation
// completed with the outcome the tool's owner confirmed.
const ResolvedByReconcile = "reconcile"

// MaxReconcileAttemptsKept bounds the attempts a record keeps (the latest
// ones): the count goes on, the list stays small.
const MaxReconcileAttemptsKept = 20

// ReconcileAttempt is one question to a tool's owner and its answer.
type ReconcileAttempt struct {
	At time.Time
	// Outcome is the answer's kind: committed, not_committed, unknown,
	// invalid (not JSON, an unknown outcome, a body too large) or error
	// (no answer: a transport error or the timeout).
	Outcome string
	// Detail says more, in a few words free of keys and tokens.
	Detail string
}

// Reconciliation is what a record keeps of its reconciliation.
type Reconciliation struct {
	// Owner and LeaseUntil are the reconcile lease: who asks now, until when.
	Owner      string
	LeaseUntil time.Time
	// Count is the number of attempts made; Attempts the latest of them
	// (at most MaxReconcileAttemptsKept), oldest first.
	Count    int
	Attempts []ReconcileAttempt
}

// Reconciler is the narrow store side of reconciliation: a per-record
// lease so one replica at a time reconciles a record, the attempts kept
// with the record, and the two ends (completed with the confirmed outcome,
// removed so the next call runs). Every method is one atomic step.
type Reconciler interface {
	// ClaimReconcile takes the reconcile lease of the record under scope
	// for ttl, for owner, when the record is UNKNOWN or IN_PROGRESS with an
	// expired lease (abandoned; it turns UNKNOWN then, as the next claim
	// of a lease_expiry: unknown tool would turn it) and no other owner's
	// reconcile lease is alive. It returns the record with its canonical
	// arguments. ErrNotFound: no record; ErrNotResolvable: another state;
	// ErrReconcileHeld: another owner holds it.
	ClaimReconcile(ctx context.Context, scope Scope, owner string, ttl time.Duration) (Record, error)
	// RecordReconcileAttempt appends attempt to the record's
	// reconciliation, if owner still holds its reconcile lease and the
	// record is still UNKNOWN with fencingToken; else ErrLeaseLost.
	RecordReconcileAttempt(ctx context.Context, scope Scope, owner string, fencingToken int64, attempt ReconcileAttempt) (Record, error)
	// CompleteReconciled turns the record COMPLETED with resp for ttl, as
	// Resolve does, with ResolvedBy ResolvedByReconcile, if owner holds
	// its reconcile lease and it is still UNKNOWN with fencingToken; else
	// ErrLeaseLost (an operator resolved or deleted it meanwhile).
	CompleteReconciled(ctx context.Context, scope Scope, owner string, fencingToken int64, resp StoredResponse, ttl time.Duration) (Record, error)
	// DropReconciled deletes the record (and frees its step) under the same
	// condition, so the next call runs the tool; else ErrLeaseLost.
	DropReconciled(ctx context.Context, scope Scope, owner string, fencingToken int64) error
}
