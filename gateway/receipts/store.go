package receipts

import (
	"context"
	"errors"
	"time"
)

// Store keeps receipts, per tenant, in chain order. Every implementation
// passes the receiptstest conformance suite.
type Store interface {
	// Append seals r as the next receipt of tenant's chain (tenant
	// overrides r.Tenant; a zero r.Time is the store's now) and stores it.
	// Sealing and writing are one atomic step against the tenant's head,
	// so concurrent appends, from this process or another replica, never
	// fork the chain. It returns the sealed receipt; an `executed`
	// receipt of an execution the chain already has is not appended
	// ([ErrDuplicate]).
	Append(ctx context.Context, tenant string, r Receipt) (Receipt, error)
	// AppendRun is Append of several receipts of tenant, in order, in one
	// atomic step (all or none): what the gateway's writer does with what
	// queued up, one store round trip for the run. The `executed`
	// receipts of executions the chain already has (see [DedupeID]) are
	// left out, checked in the same atomic step, so a receipt recovered
	// from the outbox and the writer's own never both land; it returns
	// the receipts appended.
	AppendRun(ctx context.Context, tenant string, rs []Receipt) ([]Receipt, error)
	// List returns one page of a tenant's receipts matching f, in seq
	// order, and the cursor of the next page (0: no more). A page reads
	// at most f.Limit receipts from the store, so a selective filter may
	// answer fewer than f.Limit (even none) with a non-zero cursor.
	List(ctx context.Context, f Filter) ([]Receipt, int64, error)
	// Lines returns one page of tenant's stored receipts as the store
	// holds them (each a line as [Encode] wrote it, unless someone edited
	// the store), at most limit after seq after, in seq order, and the
	// cursor of the next page (0: no more): what an export hands to
	// [VerifyWith], so its strict parsing sees the stored bytes.
	Lines(ctx context.Context, tenant string, after int64, limit int) ([][]byte, int64, error)
	// Tenants lists the tenants that have a chain, in order.
	Tenants(ctx context.Context) ([]string, error)
	// Expire deletes the receipts sealed before before (receipts.retention)
	// and answers how many. Chain heads stay, so the next receipt
	// continues the chain.
	Expire(ctx context.Context, before time.Time) (int, error)
	// A store keeps the chains' signed checkpoints too.
	CheckpointStore
}

// Filter selects receipts for [Store.List].
type Filter struct {
	// Tenant is required: a chain is per tenant.
	Tenant string
	// Since and Until bound Time (Since inclusive, Until exclusive); zero
	// means unbounded.
	Since, Until time.Time
	// Tool and Event, when set, must match exactly.
	Tool  string
	Event Event
	// After is the cursor: only receipts with a larger seq.
	After int64
	// Limit bounds the page; 0 means [DefaultLimit], more than
	// [MaxLimit] is MaxLimit.
	Limit int
}

// Page sizes of [Store.List].
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// Errors of a [Store].
var (
	// ErrTenantRequired: a List without a tenant, or an Append with none.
	ErrTenantRequired = errors.New("receipts: tenant required")
	// ErrHeadMoved: a compare-and-append found another head than the one
	// the receipt was sealed after (another writer appended first).
	ErrHeadMoved = errors.New("receipts: chain head moved")
	// ErrDuplicate: Append of the `executed` receipt of an execution the
	// chain already has (kept for the retention, like the receipts).
	ErrDuplicate = errors.New("receipts: execution already has its executed receipt")
	// ErrContended: an append lost the race for the head too many times.
	ErrContended = errors.New("receipts: chain head contended")
)

// HeadMovedError is [ErrHeadMoved] from a store that read the current
// head's receipt in the same step: its time, so the next receipt is
// dated no earlier without another round trip.
type HeadMovedError struct {
	// HeadTime is the time of the head's receipt (zero: none, e.g. an
	// empty chain or an expired head receipt).
	HeadTime time.Time
}

func (e *HeadMovedError) Error() string { return ErrHeadMoved.Error() }

// Is makes a HeadMovedError an [ErrHeadMoved].
func (e *HeadMovedError) Is(target error) bool { return target == ErrHeadMoved }

// Normalize checks f and sets its page size: what every store does first.
func (f Filter) Normalize() (Filter, error) {
	if f.Tenant == "" {
		return f, ErrTenantRequired
	}
	switch {
	case f.Limit <= 0:
		f.Limit = DefaultLimit
	case f.Limit > MaxLimit:
		f.Limit = MaxLimit
	}
	return f, nil
}

// Match reports whether r passes f's Since, Until, Tool and Event.
func (f Filter) Match(r Receipt) bool {
	return (f.Since.IsZero() || !r.Time.Before(f.Since)) &&
		(f.Until.IsZero() || r.Time.Before(f.Until)) &&
		(f.Tool == "" || r.Tool == f.Tool) &&
		(f.Event == "" || r.Event == f.Event)
}
