package idempotency

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Approval states. A call whose rule says approve gets a record in
// StateAwaitingApproval under its own scope (tenant + tool + key, the key
// binding session, step, tool and canonical arguments), so an approval can
// only ever let that exact call run. Deciding moves it to StateApproved or
// StateDenied; the next Claim of an approved record consumes it in the
// same atomic step that claims it (it becomes IN_PROGRESS, an ordinary
// record from then on, which keeps its approval as history: the approval
// views show it as StateConsumed).
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
	// StateConsumed is never a record's state either: it is how
	// GetApproval, ListApprovals and DecideApproval show the approval of a
	// record that ran (IN_PROGRESS, COMPLETED or UNKNOWN) after a claim
	// consumed it (ApprovalView).
	StateConsumed State = "CONSUMED"
)

// IsApproval reports whether s is one of the approval states.
func (s State) IsApproval() bool {
	switch s {
	case StateAwaitingApproval, StateApproved, StateDenied, StateExpired, StateConsumed:
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
	// Requester is the call's principal id (gateway/principal): who asked.
	Requester string
	// Quorum is how many distinct principals must approve (0 and 1: one).
	Quorum int
	// Binding is what the approval was asked for beyond the record's key:
	// the SHA-256 (hex) of the tool's decide config and of its definition
	// (ApprovalBinding). A claim that would consume the approval under
	// another binding finds it stale.
	Binding string
}

// MaxQuorum bounds a rule's quorum: the approvers so far are kept with
// the record.
const MaxQuorum = 16

// maxApprovalText bounds an approval's reason and a decision's principal
// and claimed name: they are kept with the record and shown to
// operators, not documents.
const maxApprovalText = 4096

// MaxNoteBytes bounds a decision's note, the same for the console, the
// admin API, the caller endpoint and the CLI (400 over it).
const MaxNoteBytes = 1024

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
	case len(a.Reason) > maxApprovalText || len(a.Requester) > maxApprovalText || len(a.Binding) > maxApprovalText:
		return fmt.Errorf("approval reason, requester or binding above %d bytes", maxApprovalText)
	case a.Quorum < 0 || a.Quorum > MaxQuorum:
		return fmt.Errorf("approval quorum %d: want 0 … %d", a.Quorum, MaxQuorum)
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

// Approval is the approval a record carries (awaiting, approved, denied
// or expired), as Claim answers it and the admin API shows it. Consuming
// an approved record (the Claim that runs it) keeps the approval on the
// record as history (StateConsumed in the approval views); that Claim's
// Decision carries it, so the caller can tell who approved the run.
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
	// Requester is the call's principal id; Quorum and Binding as the
	// ApprovalClaim asked.
	Requester string
	Quorum    int
	Binding   string
	// ApprovedBy are the distinct principals who approved so far, in
	// order (quorum: the approval is APPROVED once there are Quorum).
	ApprovedBy []string
	// DecidedBy (a principal id), ClaimedBy (the name typed with the admin
	// token beside DecidedBy token:admin), DecidedAt and Note are set once
	// decided.
	DecidedBy string
	ClaimedBy string
	DecidedAt time.Time
	Note      string
}

// ApprovalView is rec as the approval views (GetApproval, ListApprovals,
// DecideApproval's refusal) show it: a record that carries an approval
// but is in no approval state ran after its approval was consumed, and
// shows StateConsumed.
func ApprovalView(rec Record) Record {
	if rec.Approval != nil && !rec.State.IsApproval() {
		rec.State = StateConsumed
	}
	return rec
}

// Needed is how many distinct principals must approve a: its quorum, at
// least one.
func (a *Approval) Needed() int { return max(a.Quorum, 1) }

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
	// ClaimedBy is the name typed with the admin token (DecidedBy
	// token:admin).
	ClaimedBy string
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
		e.DecidedBy, e.ClaimedBy, e.DecidedAt = a.DecidedBy, a.ClaimedBy, a.DecidedAt
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
	// Requester, when set, keeps the approvals of one principal id;
	// SessionID those of one agent session; Since and Until (zero: open)
	// those requested in [Since, Until).
	Requester    string
	SessionID    string
	Since, Until time.Time
	// Limit is the page size, 1 … MaxListLimit.
	Limit int
	// Cursor is the opaque Page.Cursor of the previous page ("" = first).
	Cursor string
}

// Keeps reports whether the approval record r passes f's requester,
// session and time filters (the ones stores apply after their listing).
func (f ApprovalFilter) Keeps(r *Record) bool {
	a := r.Approval
	switch {
	case a == nil:
		return false
	case f.Requester != "" && a.Requester != f.Requester:
		return false
	case f.SessionID != "" && (r.Step == nil || r.Step.SessionID != f.SessionID):
		return false
	case !f.Since.IsZero() && a.RequestedAt.Before(f.Since):
		return false
	case !f.Until.IsZero() && !a.RequestedAt.Before(f.Until):
		return false
	}
	return true
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
	// By is the decider's principal id (gateway/principal), verified by
	// whoever took the decision: never a name the decider typed.
	By string
	// ClaimedBy is the free-text name given with the admin token (By is
	// then token:admin), kept beside By, never as it.
	ClaimedBy string
	// Note is free text, required for a deny (its reason), at most
	// MaxNoteBytes.
	Note string
}

// ErrNoteRequired is a deny without a note.
var ErrNoteRequired = errors.New("approval decision: a deny needs a note")

// ErrNoteTooLong is a note above MaxNoteBytes.
var ErrNoteTooLong = fmt.Errorf("approval decision: note above %d bytes", MaxNoteBytes)

// CheckNote is the one rule of a decision's note, for every surface
// (console, admin API, caller endpoint, CLI): UTF-8 text of at most
// MaxNoteBytes ([ErrNoteTooLong]), not blank for a deny
// ([ErrNoteRequired]).
func CheckNote(approve bool, note string) error {
	switch {
	case len(note) > MaxNoteBytes:
		return ErrNoteTooLong
	case !utf8.ValidString(note):
		return errors.New("approval decision: the note is not UTF-8 text")
	case !approve && strings.TrimSpace(note) == "":
		return ErrNoteRequired
	}
	return nil
}

// Validate checks the decision: a principal, a note (CheckNote), bounded
// text.
func (d ApprovalDecision) Validate() error {
	switch {
	case d.By == "":
		return errors.New("approval decision: by is required")
	case len(d.By) > maxApprovalText || len(d.ClaimedBy) > maxApprovalText:
		return fmt.Errorf("approval decision: by or claimed_by above %d bytes", maxApprovalText)
	}
	return CheckNote(d.Approve, d.Note)
}

// PrincipalKeeper is implemented by a store that keeps an approval's
// Requester, Quorum, Binding, ApprovedBy and ClaimedBy and counts a
// quorum in DecideApproval: every store of this module (embedded, Redis
// and Redis Cluster, PostgreSQL). A store without it keeps none of them:
// the engine then refuses calls whose rule asks a quorum above one (it
// could not count it), and cannot refuse self-approval or stale
// approvals.
type PrincipalKeeper interface {
	KeepsPrincipals() bool
}

// KeepsPrincipals reports whether s implements PrincipalKeeper and says
// it keeps them.
func KeepsPrincipals(s any) bool {
	k, ok := s.(PrincipalKeeper)
	return ok && k.KeepsPrincipals()
}

// Approvals is the deciding side of a store: every store of this module
// implements it. Records returned carry Record.Approval; their State is
// as ApprovalState shows it (EXPIRED once an approval's expiry passed).
type Approvals interface {
	// GetApproval returns the record carrying approval id, with its
	// canonical arguments while it keeps them, as ApprovalView shows it
	// (CONSUMED once a claim ran the call and used the approval up);
	// ErrNotFound when no live record carries it (never created, swept,
	// deleted).
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
