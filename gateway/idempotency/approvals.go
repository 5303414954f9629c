package idempotency

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Approval states. A call whose rule says approve gets a record in
// StateAwaitingApproval under its own scope (tenant + tool + key, the key
// binding session, step, tool and canonical arguments), so an approval can
// only ever let that exact call run. Deciding moves it to StateApproved or
// StateDenied; the next Claim of an approved record consumes it in the
// same atomic step that claims it (it becomes IN_PROGRESS, an ordinary
// record from then on).
//
// StateExpired is never written: a pending approval whose timeout passed,
// or an approved one not consumed within its use-within window, reads as
// StateExpired wherever a store shows or decides on it (Claim, Get, List,
// GetApproval, DecideApproval), on the store's clock. So no sweeper and no
// write is needed for expiry; the record stays until its replay TTL after
// the expiry, answering every call of its key with
// OutcomeApprovalExpired, and the sweep removes it then.
const (
	StateAwaitingApproval State = "AWAITING_APPROVAL"
	StateApproved         State = "APPROVED"
	StateDenied           State = "DENIED"
	StateExpired          State = "EXPIRED"
)

// IsApproval reports whether s is one of the approval states.
func (s State) IsApproval() bool {
	switch s {
	case StateAwaitingApproval, StateApproved, StateDenied, StateExpired:
		return true
	}
	return false
}

// Approver says who decides an approval: an operator (admin API, console)
// or the caller's own human (a tenant token, MCP elicitation).
type Approver string

// Approver kinds ("" is treated as operator, the default).
const (
	ApproverOperator Approver = "operator"
	ApproverCaller   Approver = "caller"
)

// ApprovalClaim is the call's decision when its rule says approve: what a
// Claim that finds no record writes as the pending approval.
type ApprovalClaim struct {
	// ID is the approval id (a ULID), minted by the caller for every
	// request; a Claim that finds the call already pending answers the
	// stored approval's id instead.
	ID string
	// Rule is the index of the deciding rule in the tool's decide list;
	// Reason is its reason.
	Rule   int
	Reason string
	// Approver says who may decide it.
	Approver Approver
	// Timeout is how long the approval may stay pending
	// (approvals.timeout); UseWithin how long an approved call may wait
	// for its caller's next call (approvals.use_within).
	Timeout, UseWithin time.Duration
}

// maxApprovalText bounds an approval's reason, decided-by and note: they
// are kept with the record and shown to operators, not documents.
const maxApprovalText = 4096

// Validate checks an approval claim: an id, positive durations, a known
// approver, bounded text.
func (a ApprovalClaim) Validate() error {
	switch {
	case a.ID == "":
		return errors.New("approval id is required")
	case a.Timeout <= 0 || a.UseWithin <= 0:
		return fmt.Errorf("approval timeout %v and use-within %v must be positive", a.Timeout, a.UseWithin)
	case a.Rule < 0:
		return fmt.Errorf("approval rule index %d is negative", a.Rule)
	case len(a.Reason) > maxApprovalText:
		return fmt.Errorf("approval reason above %d bytes", maxApprovalText)
	}
	return a.Approver.Validate()
}

// OrDefault is a, or ApproverOperator for "" (what every store records).
func (a Approver) OrDefault() Approver {
	if a == "" {
		return ApproverOperator
	}
	return a
}

// Validate checks an approver kind.
func (a Approver) Validate() error {
	switch a {
	case "", ApproverOperator, ApproverCaller:
		return nil
	}
	return fmt.Errorf("approver %q: want %q or %q", string(a), ApproverOperator, ApproverCaller)
}

// Approval is the approval a record carries while it is one (awaiting,
// approved, denied or expired), as Claim answers it and the admin API
// shows it. Consuming an approved record (the Claim that runs it) drops
// the approval from the record; that Claim's Decision carries it, so the
// caller can tell who approved the run.
type Approval struct {
	ID       string
	Rule     int
	Reason   string
	Approver Approver
	// RequestedAt is when the call asked. ExpiresAt is when the approval
	// expires: pending, RequestedAt + timeout; approved, DecidedAt +
	// use-within; denied, DecidedAt (it never runs).
	RequestedAt, ExpiresAt time.Time
	// UseWithin is the approved call's window, kept from the request.
	UseWithin time.Duration
	// DecidedBy, DecidedAt and Note are set once decided.
	DecidedBy string
	DecidedAt time.Time
	Note      string
}

// ApprovalState is the state a record in stored state stored shows at
// now: StateExpired for a pending or approved approval whose expiry has
// passed, else stored. Every store decides and lists through it.
func ApprovalState(stored State, expiresAt, now time.Time) State {
	if (stored == StateAwaitingApproval || stored == StateApproved) && !now.Before(expiresAt) {
		return StateExpired
	}
	return stored
}

// ErrApprovalNotPending is what an *ApprovalNotPendingError matches with
// errors.Is: DecideApproval found the approval already decided or expired
// (the admin API's 409 approval_not_pending).
var ErrApprovalNotPending = errors.New("idempotency: approval not pending")

// ApprovalNotPendingError says why an approval cannot be decided: its
// current state and, when decided, by whom and when (the console shows
// "already approved by X at T").
type ApprovalNotPendingError struct {
	State     State
	DecidedBy string
	DecidedAt time.Time
}

// Error names the state and the earlier decision, if any.
func (e *ApprovalNotPendingError) Error() string {
	if e.DecidedBy == "" {
		return fmt.Sprintf("idempotency: approval not pending: %s", e.State)
	}
	return fmt.Sprintf("idempotency: approval not pending: %s by %s at %s", e.State, e.DecidedBy, e.DecidedAt.UTC().Format(time.RFC3339))
}

// Is makes errors.Is(err, ErrApprovalNotPending) true.
func (e *ApprovalNotPendingError) Is(target error) bool { return target == ErrApprovalNotPending }

// NotPending is the error of deciding a record in state (as ApprovalState
// shows it) carrying a.
func NotPending(state State, a *Approval) error {
	e := &ApprovalNotPendingError{State: state}
	if a != nil {
		e.DecidedBy, e.DecidedAt = a.DecidedBy, a.DecidedAt
		if state == StateExpired && a.DecidedAt.IsZero() {
			e.DecidedAt = a.ExpiresAt
		}
	}
	return e
}

// ApprovalFilter selects approvals for Approvals.ListApprovals. Empty
// fields match anything; State, when set, is one of the approval states.
type ApprovalFilter struct {
	State  State
	Tenant string
	Tool   string
	// Limit is the page size, 1 … MaxListLimit.
	Limit int
	// Cursor is the opaque Page.Cursor of the previous page ("" = first).
	Cursor string
}

// ListFilter is f as the List filter that every store's ListApprovals
// runs, keeping only the records that carry an approval.
func (f ApprovalFilter) ListFilter() ListFilter {
	return ListFilter{State: f.State, Tenant: f.Tenant, Tool: f.Tool, Limit: f.Limit, Cursor: f.Cursor}
}

// Validate checks the filter's state and limit.
func (f ApprovalFilter) Validate() error {
	if f.Limit < 1 || f.Limit > MaxListLimit {
		return fmt.Errorf("limit %d: want 1 … %d", f.Limit, MaxListLimit)
	}
	if f.State != "" && !f.State.IsApproval() {
		return fmt.Errorf("state %q is not an approval state: %w", f.State, ErrInvalidCursor)
	}
	return nil
}

// ApprovalDecision is an approver's answer to one pending approval.
type ApprovalDecision struct {
	Approve bool
	// By names the approver (an operator's name, or the tenant for
	// approver: caller); Note is free text (a deny's reason).
	By, Note string
}

// Validate bounds the decision's text.
func (d ApprovalDecision) Validate() error {
	if d.By == "" {
		return errors.New("approval decision: by is required")
	}
	if len(d.By) > maxApprovalText || len(d.Note) > maxApprovalText {
		return fmt.Errorf("approval decision: by or note above %d bytes", maxApprovalText)
	}
	return nil
}

// Approvals is the deciding side of a store: every store of this module
// implements it. Records returned carry Record.Approval; their State is
// as ApprovalState shows it (EXPIRED once an approval's expiry passed).
type Approvals interface {
	// GetApproval returns the record carrying approval id, with its
	// canonical arguments; ErrNotFound when no live record carries it
	// (never created, swept, deleted, or consumed by the claim that ran
	// it).
	GetApproval(ctx context.Context, id string) (Record, error)
	// ListApprovals returns the records carrying an approval that match
	// filter, one bounded page at a time, in the order of the store's
	// Admin.List (records carry no CanonicalArguments). A page may hold
	// fewer than Limit records, even none, and still have a cursor.
	ListApprovals(ctx context.Context, filter ApprovalFilter) (Page, error)
	// DecideApproval approves or denies a pending approval in one atomic
	// step, on the store's clock, and returns the record as decided:
	// approved, it may be consumed until now + its use-within; denied, it
	// answers OutcomeApprovalDenied until its replay TTL ends. An approval
	// that is not pending (decided, expired) is an
	// *ApprovalNotPendingError; an unknown id is ErrNotFound.
	DecideApproval(ctx context.Context, id string, decision ApprovalDecision) (Record, error)
}
