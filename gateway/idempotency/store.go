// Package idempotency holds the domain of the gateway's exactly-once layer:
// the record states, the decision a store takes for one request in one atomic
// step, and the Store interface that every backend (Redis, PostgreSQL, the
// embedded file store) implements. The backends live in sub-packages named after what they
// store into; storetest is the conformance suite they all pass.
package idempotency

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/toolgateway/toolgateway/tools"
)

// State is the state of an idempotency record.
type State string

// Record states, as the admin API shows them.
const (
	StateInProgress State = "IN_PROGRESS"
	StateCompleted  State = "COMPLETED"
	StateUnknown    State = "UNKNOWN"
)

// LeaseExpiry is a tool's policy for an IN_PROGRESS record whose lease
// expired because its gateway died; the type, its values and their check
// are tools' (one policy type), named here for the stores.
type LeaseExpiry = tools.LeaseExpiry

// Lease expiry policies ("" is treated as rerun, the default).
const (
	// LeaseExpiryRerun takes the record over and runs the tool again.
	LeaseExpiryRerun = tools.LeaseExpiryRerun
	// LeaseExpiryUnknown turns the record UNKNOWN: the tool must never run
	// twice, so a human decides.
	LeaseExpiryUnknown = tools.LeaseExpiryUnknown
)

// Errors a Store returns. Any other error means the store could not be
// reached or failed; the gateway answers 503 and runs nothing.
var (
	// ErrLeaseLost: the caller is no longer the record's owner (its lease
	// expired and another request took over, or an operator deleted it).
	ErrLeaseLost = errors.New("idempotency: lease lost")
	// ErrNotFound: no record under that scope.
	ErrNotFound = errors.New("idempotency: record not found")
	// ErrNotResolvable: Resolve found the record in a state an operator
	// may not overwrite (COMPLETED, or IN_PROGRESS with a live lease).
	ErrNotResolvable = errors.New("idempotency: record not resolvable")
	// ErrInvalidCursor: Admin.List was given a cursor it did not hand out
	// (or a filter it cannot serve); the admin API answers 400.
	ErrInvalidCursor = errors.New("idempotency: invalid list cursor or filter")
	// ErrEffectsUnsupported: a claim named an effect on a store that does
	// not keep effect reservations (see EffectKeeper).
	ErrEffectsUnsupported = errors.New("idempotency: this store does not keep effect keys")
	// ErrBudgetsUnsupported: a claim named budget charges on a store that
	// does not keep budget reservations (see BudgetKeeper).
	ErrBudgetsUnsupported = errors.New("idempotency: this store does not keep budgets")
)

// Scope names one record: a tenant never sees another tenant's records.
type Scope struct {
	Tenant string
	Tool   string
	Key    string // the unquoted Idempotency-Key
}

// keyPrefixLen is how much of an idempotency key may appear in a log line
// or in an error that can be logged: enough to correlate lines, too little
// to replay the key.
const keyPrefixLen = 8

// KeyPrefix returns the first characters of key, the only part of a key
// that may be logged (a key can be replayed by whoever reads it).
func KeyPrefix(key string) string {
	return key[:min(len(key), keyPrefixLen)]
}

// String names the scope with the key's prefix only, so a scope in an
// error or a log line never carries the full key.
func (s Scope) String() string {
	return s.Tenant + "/" + s.Tool + "/" + KeyPrefix(s.Key) + "…"
}

// Step names one step of an agent session, for the step guard.
type Step struct {
	SessionID string
	Index     uint64
}

// ClaimRequest asks the store to decide what to do with one request.
type ClaimRequest struct {
	Scope Scope
	// Fingerprint is lowercase hex SHA-256 of the canonical arguments.
	Fingerprint string
	// Step, when non-nil, is the agent step of the call. It is used for the
	// step guard (when StepGuard is set) and, in a sharded store, to keep the
	// record and its step entry together.
	Step      *Step
	StepGuard bool
	// StepBoundKey says the key was derived from the step (derived mode), so
	// the same key always comes with the same step. Only then may a sharded
	// store keep the record next to its step entry; a key that is not bound
	// to its step must be found by its scope alone, whatever step a request
	// names (on Redis Cluster such a claim gets no step guard, since the
	// step entry lives in another slot).
	StepBoundKey bool
	// ExecutionID and Owner are minted by the caller for a new claim (first
	// claim or takeover); they are ignored otherwise.
	ExecutionID string
	Owner       string
	// LockTTL is the lease: how long the claim stays IN_PROGRESS without renewal.
	LockTTL time.Duration
	// ReplayTTL is how long an UNKNOWN record lives (a COMPLETED one gets its
	// TTL from Complete).
	ReplayTTL time.Duration
	// LeaseExpiry says what happens to an IN_PROGRESS record whose lease expired.
	LeaseExpiry LeaseExpiry
	// CanonicalArguments are the call's arguments in canonical form (JCS),
	// kept with the IN_PROGRESS record and an UNKNOWN one so an operator
	// can check the effect before resolving; Complete drops them (unless
	// the lease says Lease.KeepArguments) and Resolve drops them. Nil
	// stores none.
	CanonicalArguments []byte
	// Approval is the call's decision: nil when its rules allow it, the
	// pending approval to write when they say approve. The caller answers
	// a deny itself and never calls Claim for it; in particular a call
	// whose rules now deny must not reach Claim, or an APPROVED record
	// would be consumed (see Store.Claim for the approval rows).
	Approval *ApprovalClaim
	// Effect, when non-nil, is the call's business identity (the tool's
	// effect_key evaluated on its arguments): one record of tenant + tool
	// holds it at a time, whatever its key, session or step (see
	// Store.Claim). Nil claims no effect. A store that cannot keep
	// effects refuses such a claim with ErrEffectsUnsupported.
	Effect *Effect
	// Identity is which identity keyed the call, as the call path
	// describes it (JSON text, a few hundred bytes at most): kept with the
	// record the claim writes, for its whole life, and shown to
	// operators. "" keeps none.
	Identity string
	// Charges are the budget reservations the call takes (see Charge):
	// all or none. Nil charges nothing, and costs nothing more. A store
	// that cannot keep budgets refuses such a claim with
	// ErrBudgetsUnsupported.
	Charges []Charge
	// Requester is the call's principal id (gateway/principal; "" without
	// auth): who asked. A claim that writes a new record keeps it there
	// (Record.Requester); a takeover or a consuming claim keeps the
	// record's.
	Requester string
}

// Charge is one budget reservation a claim asks for. The store reserves
// Cost in Bucket in the claim's own atomic step, and only when the claim
// writes a new IN_PROGRESS record (a first claim, or the consumption of an
// approved record): a replay, a takeover, a duplicate in flight or the
// same owner's repeated claim charges nothing, since the record already
// holds its reservation. A first claim whose reservations would bring any
// bucket's sum (the entries at or after Since) over Limit writes nothing
// and answers OutcomeBudgetExceeded; the consumption of an approved record
// is charged whatever the sum (a human approved it: headroom may go
// negative). A reservation is an entry of the bucket named by the
// record's scope; it counts from the claim until the record is released
// (Release) or deleted by an operator (Delete), both in the same atomic
// step as the record's removal. Nothing else removes it: a completed,
// UNKNOWN, taken-over, resolved or swept record keeps counting in its
// window, so the sum of committed and held costs never exceeds the limit.
type Charge struct {
	// Bucket names the budget, its scope and (for a calendar window) its
	// window, e.g. "refunds-daily|t:acme|2026-12-07"; budgets.Set builds it.
	Bucket string
	// Budget is the budget's name, for the refusal.
	Budget string
	// Limit and Cost are in millionths of the configured unit (integers,
	// so every store sums them exactly).
	Limit, Cost int64
	// At is when the reservation is made (its window is the one At falls
	// in); Since is the start of the current window: entries before it
	// no longer count.
	At, Since time.Time
	// Retain is how long the bucket must be kept after At (the window's
	// length and a day), after which a store may drop it.
	Retain time.Duration
	// Rolling says the bucket outlives windows (a rolling window: one
	// bucket per scope, whose entries count while at or after Since);
	// otherwise the bucket is the window, every entry in it counts, and a
	// store may keep a running total instead of summing entries.
	Rolling bool
}

// BudgetExceeded names the budget a claim's charge would overspend.
type BudgetExceeded struct {
	Budget string
	// Remaining is Limit minus the bucket's sum, in millionths (negative
	// once approved calls went over).
	Remaining int64
}

// BudgetKeeper is implemented by the stores that keep budget
// reservations (ClaimRequest.Charges).
type BudgetKeeper interface {
	// KeepsBudgets reports whether Claim honours ClaimRequest.Charges.
	KeepsBudgets() bool
	// BudgetUsage reads what counts in a bucket's window (the entries at
	// or after since; every entry of a bucket that is not rolling) and
	// how much of it is held by records whose outcome is still open
	// (IN_PROGRESS or UNKNOWN, or gone without a release: never
	// reported as less than it may be). A bucket never charged is zero.
	BudgetUsage(ctx context.Context, bucket string, since time.Time, rolling bool) (BudgetUsage, error)
	// Reservations reads the budget reservations the record under scope
	// holds in its current life: what settling it now (Resolve and
	// reconciliation's completion commit them; Delete and reconciliation's
	// drop release them) settles, for the settlement's receipts. A record
	// that charged nothing holds none; no record: ErrNotFound. It reads
	// in a step of its own: the caller reads before it settles, while the
	// record's life (UNKNOWN, or held under a reconcile lease) cannot
	// change its charges.
	Reservations(ctx context.Context, scope Scope) ([]Reservation, error)
}

// Reservation is one budget reservation of a record, as Reservations
// reads it: the budget's name and the cost in millionths.
type Reservation struct {
	Budget string
	Cost   int64
}

// BudgetOfBucket is the budget's name in a bucket name (Charge.Bucket):
// the bucket starts with it, up to the first "|" (a budget's name holds
// none).
func BudgetOfBucket(bucket string) string {
	name, _, _ := strings.Cut(bucket, "|")
	return name
}

// BudgetUsage is a bucket's window as BudgetKeeper.BudgetUsage reads it,
// in millionths: Reserved counts against the limit; Held is the part of
// it whose records are not COMPLETED (Used = Reserved - Held).
type BudgetUsage struct {
	Reserved, Held int64
}

// Effect is the value of a tool's effect key for one call. Its scope is
// tenant + tool (the claim's), so two tenants or two tools never share
// an effect.
type Effect struct {
	// Value is the evaluated template, e.g. "refund:txn_42".
	Value string
}

// EffectKeeper is implemented by the stores that keep effect
// reservations (ClaimRequest.Effect); the gateway refuses a tool with an
// effect key on any other store rather than run it without the guard.
type EffectKeeper interface {
	// KeepsEffects reports whether Claim honours ClaimRequest.Effect.
	KeepsEffects() bool
}

// Validate checks what every store needs of a claim, so the stores refuse
// the same requests: positive TTLs, an owner and an execution id, a known
// lease expiry policy.
func (r ClaimRequest) Validate() error {
	switch {
	case r.LockTTL <= 0 || r.ReplayTTL <= 0:
		return fmt.Errorf("lock ttl %v and replay ttl %v must be positive", r.LockTTL, r.ReplayTTL)
	case r.Owner == "" || r.ExecutionID == "":
		return errors.New("owner and execution id are required")
	}
	for _, c := range r.Charges {
		if c.Bucket == "" || c.Cost < 0 || c.Since.After(c.At) {
			return fmt.Errorf("budget charge %q: a bucket, a non-negative cost and a window start not after the charge are required", c.Budget)
		}
	}
	if r.Approval != nil {
		if err := r.Approval.Validate(); err != nil {
			return err
		}
	}
	return r.LeaseExpiry.Validate()
}

// Outcome is what the store decided.
type Outcome int

// The decisions of a claim.
const (
	// OutcomeClaimed: the caller owns a new IN_PROGRESS record and must run
	// the tool (Decision.TakenOver tells a takeover from a first claim).
	OutcomeClaimed Outcome = iota + 1
	// OutcomeReplay: COMPLETED with the same fingerprint; Decision.Response
	// holds the stored response.
	OutcomeReplay
	// OutcomeInProgress: IN_PROGRESS, lease alive; Decision.RetryAfter is the
	// remaining lease.
	OutcomeInProgress
	// OutcomeKeyReused: a record exists under the key with another fingerprint.
	OutcomeKeyReused
	// OutcomeStepConflict: the step is held by another key; Decision.Conflict
	// names the earlier call.
	OutcomeStepConflict
	// OutcomeUnknown: the record is UNKNOWN (possibly just now, because the
	// lease expired under LeaseExpiryUnknown).
	OutcomeUnknown
	// OutcomeAwaitingApproval: the call waits for a human's decision (its
	// record was just written, or already was); Decision.Approval holds
	// the stored approval (its id and expiry). Nothing runs.
	OutcomeAwaitingApproval
	// OutcomeApprovalDenied: the call's approval was denied;
	// Decision.Approval says by whom and why.
	OutcomeApprovalDenied
	// OutcomeApprovalExpired: the call's approval expired, pending or
	// approved but not used in time; Decision.Approval holds it.
	OutcomeApprovalExpired
	// OutcomeEffectConflict: another record (another key, session or
	// step) holds the request's effect with other arguments;
	// Decision.EffectHolder names it. Nothing runs.
	OutcomeEffectConflict
	// OutcomeBudgetExceeded: the call's charges would take a budget over
	// its limit; Decision.Budget names it. Nothing was written or run.
	OutcomeBudgetExceeded
)

// String names the outcome for logs and tests.
func (o Outcome) String() string {
	switch o {
	case OutcomeClaimed:
		return "claimed"
	case OutcomeReplay:
		return "replay"
	case OutcomeInProgress:
		return "in_progress"
	case OutcomeKeyReused:
		return "key_reused"
	case OutcomeStepConflict:
		return "step_conflict"
	case OutcomeUnknown:
		return "unknown"
	case OutcomeAwaitingApproval:
		return "awaiting_approval"
	case OutcomeApprovalDenied:
		return "approval_denied"
	case OutcomeApprovalExpired:
		return "approval_expired"
	case OutcomeEffectConflict:
		return "effect_conflict"
	case OutcomeBudgetExceeded:
		return "budget_exceeded"
	}
	return "invalid"
}

// StoredResponse is a tool outcome kept for replay.
type StoredResponse struct {
	Status      int
	ContentType string
	Body        []byte
}

// Lease is the caller's ownership of an IN_PROGRESS record.
type Lease struct {
	Scope        Scope
	Step         *Step // as in the ClaimRequest, so Release can free the step
	Owner        string
	FencingToken int64
	ExecutionID  string
	// Effect is the effect the lease's record holds, set by a store that
	// keeps the reservation apart from the record (Redis), so that
	// Release removes it with the record.
	Effect *Effect
	// Charges are the budget charges of the lease's call, set by the
	// gateway for its receipts (the stores neither read nor write it).
	Charges []Charge
	// KeepArguments, set by the gateway from its config
	// (idempotency.keep_arguments), asks Complete (and TxCall.Complete)
	// to keep the record's canonical arguments with the COMPLETED record
	// for its whole TTL, so `gateway policy replay` can evaluate the call
	// later; false drops them, as ever. Resolve and reconciliation drop
	// them either way.
	KeepArguments bool
}

// StepHolder names the call that holds a step (for step_conflict).
type StepHolder struct {
	Tool        string
	ExecutionID string
}

// Decision is the result of Claim.
type Decision struct {
	Outcome Outcome
	// Lease is set for OutcomeClaimed.
	Lease Lease
	// TakenOver is set when the claim took over an expired lease.
	TakenOver bool
	// ExecutionID is the record's execution id (for Claimed, Replay,
	// InProgress and Unknown).
	ExecutionID string
	// Response is set for OutcomeReplay.
	Response *StoredResponse
	// RetryAfter is the remaining lease, for OutcomeInProgress.
	RetryAfter time.Duration
	// Conflict is set for OutcomeStepConflict.
	Conflict *StepHolder
	// Approval is the record's approval for the approval outcomes, and
	// for an OutcomeClaimed that consumed an approved record (who
	// approved the run; nil for a claim without approval).
	Approval *Approval
	// ByEffect is set when the decision came from the record holding the
	// request's effect under another key (a replay, in progress or
	// UNKNOWN of that holder; or a takeover of its expired lease, whose
	// Lease then names the holder's scope).
	ByEffect bool
	// EffectHolder is set for OutcomeEffectConflict.
	EffectHolder *EffectHolder
	// Budget is set for OutcomeBudgetExceeded.
	Budget *BudgetExceeded
}

// EffectHolder names the record that holds an effect (for effect_conflict).
type EffectHolder struct {
	ExecutionID string
	State       State
}

// Record is a stored record, as the admin API shows it.
type Record struct {
	Scope          Scope
	State          State
	Fingerprint    string
	ExecutionID    string
	FencingToken   int64
	CreatedAt      time.Time
	ExpiresAt      time.Time       // when the record disappears
	LeaseExpiresAt time.Time       // IN_PROGRESS only
	Response       *StoredResponse // COMPLETED only
	// Step is the agent step the record was claimed with, when the store
	// keeps it (nil: no step, or a store that cannot tell).
	Step *Step
	// CanonicalArguments are the claim's canonical arguments, for an
	// IN_PROGRESS or UNKNOWN record (nil once COMPLETED unless its lease
	// asked to keep them, Lease.KeepArguments; nil in Admin.List pages,
	// which stay small). An approval record keeps them too, so an
	// approver sees what the call would do.
	CanonicalArguments []byte
	// Approval is set for a record in an approval state.
	Approval *Approval
	// Reconciliation is set once a reconciler claimed the record (stores
	// implementing [Reconciler]).
	Reconciliation *Reconciliation
	// ResolvedBy is ResolvedByReconcile for a record reconciliation
	// completed; "" otherwise.
	ResolvedBy string
	// Requester is the principal id of the call that wrote the record
	// (ClaimRequest.Requester), "" when it named none.
	Requester string
	// Identity is the claim's Identity ("" when it had none).
	Identity string
}

// IdentityKeeper is implemented by a store that keeps each record's
// Identity (ClaimRequest.Identity): every store here (embedded, Redis and
// Redis Cluster, PostgreSQL; storetest requires it). A record an earlier
// release wrote has none; its session says what it can
// (IdentityOfRecord).
type IdentityKeeper interface {
	KeepsIdentity() bool
}

// MaxListLimit is the largest page Admin.List returns.
const MaxListLimit = 1000

// ListFilter selects records for Admin.List. Empty fields match anything.
type ListFilter struct {
	State  State
	Tenant string
	Tool   string
	// SessionID selects the records of one agent session; stores may
	// require Tenant with it (the session is scoped by its tenant).
	SessionID string
	// Limit is the page size, 1 … MaxListLimit.
	Limit int
	// Cursor is the opaque Page.Cursor of the previous page ("" = first).
	Cursor string
}

// Matches reports whether the filter selects r (its State, Tenant, Tool
// and SessionID; Limit and Cursor page, they select nothing): what a store
// that filters while it scans applies to each record it loads.
func (f ListFilter) Matches(r Record) bool {
	switch {
	case f.State != "" && r.State != f.State,
		f.Tenant != "" && r.Scope.Tenant != f.Tenant,
		f.Tool != "" && r.Scope.Tool != f.Tool,
		f.SessionID != "" && (r.Step == nil || r.Step.SessionID != f.SessionID):
		return false
	}
	return true
}

// Page is one page of Admin.List.
type Page struct {
	Records []Record
	// Cursor continues the listing; "" means this was the last page. A page
	// may hold fewer than Limit records (even none) and still have a
	// cursor: stores that filter while they scan stop at a bounded amount
	// of work per page.
	Cursor string
}

// Admin is the operators' side of a store: search and resolve, behind the
// admin API. Every store of this module implements it.
type Admin interface {
	// List returns the records matching filter, newest first where the
	// store can, one bounded page at a time (never one unbounded scan per
	// call). Records carry no Response and no CanonicalArguments. A Limit out of range is an error;
	// a cursor the store did not hand out (or a filter it cannot serve,
	// such as a session without a tenant where it requires one) is
	// ErrInvalidCursor.
	List(ctx context.Context, filter ListFilter) (Page, error)
	// FindExecution returns the record whose execution id is id, in any
	// tenant, with its Response when COMPLETED; else ErrNotFound.
	FindExecution(ctx context.Context, executionID string) (Record, error)
	// Resolve turns an UNKNOWN record, or an IN_PROGRESS one whose lease
	// has expired, into COMPLETED with resp for ttl, keeping its execution
	// id, fingerprint and step, so the agent's retry replays resp instead of
	// running the tool again. Other states: ErrNotResolvable; no record:
	// ErrNotFound. It returns the record as resolved.
	Resolve(ctx context.Context, scope Scope, resp StoredResponse, ttl time.Duration) (Record, error)
}

// Store is the idempotency backend. Every method is one atomic step.
type Store interface {
	// Claim looks up the record and decides, in one atomic operation, whether
	// the caller runs the tool (and then creates or takes over the
	// IN_PROGRESS record), replays, waits or is refused. There is never a
	// separate "read, then lock" sequence.
	//
	// Order of the decision: a record under the key decides first (other
	// fingerprint → KeyReused whatever its state; COMPLETED → Replay;
	// UNKNOWN → Unknown; IN_PROGRESS alive → InProgress; IN_PROGRESS expired
	// → takeover or UNKNOWN per LeaseExpiry). Without a record, the step
	// guard applies: a step held by a live record under another key →
	// StepConflict. Otherwise a new record is claimed and the step is bound
	// to it — or, when req.Approval is set, a new AWAITING_APPROVAL record
	// is written (bound to the step the same way) and the answer is
	// AwaitingApproval: nothing runs.
	//
	// Effects (req.Effect set): after the step guard, before a new record
	// is written, the effect's reservation is looked up. A reservation
	// counts only while its holder — a live record under another key that
	// claimed this effect value — exists, so it lives exactly as long as
	// the holder's record (released, deleted, swept or expired with it;
	// an UNKNOWN holder keeps it). Holder with another fingerprint →
	// EffectConflict (its execution id and state). Same fingerprint → the
	// holder's own decision, with ByEffect: COMPLETED → Replay of its
	// response, UNKNOWN → Unknown, IN_PROGRESS alive → InProgress,
	// IN_PROGRESS expired → takeover of the holder's record (the Lease
	// names the holder's scope) or UNKNOWN per LeaseExpiry; a holder
	// waiting for an approval → InProgress. No holder → the new record
	// (IN_PROGRESS or AWAITING_APPROVAL) is written and takes the
	// reservation in the same atomic step, so two claims of one effect
	// never both run, whatever their keys. (A sharded store may take the
	// reservation in a second step after the record's claim, as Redis
	// does; it must then run nothing until it holds both, give back what
	// its record's claim did when another holder has it — an approval it
	// consumed goes back unused, a pending approval it just wrote is
	// withdrawn — and keep the reservation at least as long as the record
	// lives, however the record is extended later: Complete, MarkUnknown,
	// a takeover, Resolve, reconciliation.)
	//
	// Approval records (same fingerprint; another is KeyReused as ever):
	// AWAITING_APPROVAL → AwaitingApproval with the stored approval (its
	// id, not the request's); APPROVED → consumed: it becomes IN_PROGRESS
	// exactly like a first claim (owner, lease, fencing token, the
	// request's execution id; Claimed, with Decision.Approval), whatever
	// req.Approval says; DENIED → ApprovalDenied; expired (pending past
	// its timeout, approved past its use-within) → ApprovalExpired. A
	// request without Approval (its rules allow it now) that finds a
	// pending approval claims it and runs, as for an approved one: the
	// rules no longer ask anyone, so waiting would only block the call,
	// and the contract's "a rule that now allows just runs" holds for it
	// too. The pending approval is gone then (GetApproval: ErrNotFound).
	// With req.Effect set, an approval record that does not hold the
	// effect yet (asked for before the tool had its effect key) takes it
	// first: held by another record, the claim answers as that holder (as
	// above) and the approval stays on its record, unconsumed.
	//
	// Every claim (first or takeover) gets a fencing token larger than any
	// earlier token of the same scope, even across deletions of the record.
	Claim(ctx context.Context, req ClaimRequest) (Decision, error)
	// Renew extends the lease to ttl from now if the caller still owns it,
	// else ErrLeaseLost.
	Renew(ctx context.Context, lease Lease, ttl time.Duration) error
	// Complete stores the response as COMPLETED for ttl if the caller still
	// owns the record, else ErrLeaseLost (and changes nothing). The step
	// entry lives as long as the record.
	//
	// "Owns" here and in MarkUnknown means the record is IN_PROGRESS under
	// the lease's owner and fencing token, whether or not its lease has run
	// out: a lease that expired while the store did not answer, and that no
	// other claim took over, is still the caller's, so an outcome kept
	// through a store outage can still be recorded.
	Complete(ctx context.Context, lease Lease, resp StoredResponse, ttl time.Duration) error
	// MarkUnknown turns the caller's IN_PROGRESS record UNKNOWN for ttl (the
	// tool's replay TTL) if the caller still owns it (as for Complete),
	// else ErrLeaseLost (and changes nothing): the outcome of a tool that
	// must never run twice is uncertain, so every retry answers
	// OutcomeUnknown until an operator resolves or deletes the record. The
	// record keeps its execution id, fingerprint and step.
	MarkUnknown(ctx context.Context, lease Lease, ttl time.Duration) error
	// Release deletes the record (and frees its step) if the caller still
	// owns it, so a retry runs the tool again; else ErrLeaseLost.
	Release(ctx context.Context, lease Lease) error
	// Get returns the record under scope, or ErrNotFound.
	Get(ctx context.Context, scope Scope) (Record, error)
	// Delete removes the record under scope (and frees its step), or
	// returns ErrNotFound.
	Delete(ctx context.Context, scope Scope) error
	// Ping reports whether the store answers.
	Ping(ctx context.Context) error
	// Close releases the store's resources.
	Close() error
}

// TxStore is a store that can record a call's outcome inside the
// transaction its tool wrote in (the PostgreSQL store): the tool's writes and
// the COMPLETED record commit together or not at all. The gateway runs
// tools declared tools.Spec.Transactional through it, and refuses such
// tools on a store that is not a TxStore.
type TxStore interface {
	// BeginCall opens the transaction of a transactional call that holds
	// lease. The claim itself is already committed, so other gateways see
	// the call IN_PROGRESS while the tool runs.
	BeginCall(ctx context.Context, lease Lease) (TxCall, error)
}

// TxCall is one transactional execution.
type TxCall interface {
	// Tx is the transaction as the tool receives it (tools.Request.Tx).
	Tx() tools.Tx
	// Complete records resp as the outcome inside the transaction, behind
	// the fencing check, and commits; a lost lease rolls everything back
	// and returns ErrLeaseLost. It cannot be repeated: any other error means
	// the commit did not happen, or (a connection lost during COMMIT) that
	// the record alone can tell.
	Complete(ctx context.Context, resp StoredResponse, ttl time.Duration) error
	// Rollback undoes the tool's writes; safe after Complete.
	Rollback(ctx context.Context) error
}
