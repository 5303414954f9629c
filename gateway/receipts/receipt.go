// Package receipts is the gateway's tamper-evident record of consequential
// events: every call executed, denied, every approval requested, granted,
// denied or expired, every effect conflict, every record made UNKNOWN,
// resolved or deleted, every tool pinned or accepted leaves a [Receipt]. A tenant's receipts form a hash
// chain: each carries the hash of the one before it ([Receipt.Prev]) and its
// own hash over everything else ([Receipt.Hash]), so [Verify] names the first
// receipt that was altered, removed or reordered.
//
// A chain's head is signed into a [Checkpoint] (Ed25519, [SigningKey]),
// optionally time-stamped by an RFC 3161 authority ([TSA]), and stored
// with the chain, so [VerifyWith] holding the public keys also catches a
// chain truncated, rolled back or re-sealed by whoever can write the
// store.
//
// Sealing ([Seal]) is pure; a [Store] appends a receipt by compare-and-append
// on the tenant's head (see [Appender]), so replicas appending at once never
// fork a chain. The stores live in the sub-packages redisreceipts, pgreceipts
// and boltreceipts; receiptstest is the conformance suite they all pass.
// This package imports nothing of the gateway, so the stores can import it.
package receipts

import (
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// Event is what a receipt records.
type Event string

// The events, by their wire names (the receipt's "event" member).
const (
	EventExecuted          Event = "executed"
	EventDenied            Event = "denied"
	EventApprovalRequested Event = "approval_requested"
	EventApprovalGranted   Event = "approval_granted"
	EventApprovalDenied    Event = "approval_denied"
	EventApprovalExpired   Event = "approval_expired"
	EventEffectConflict    Event = "effect_conflict"
	EventMadeUnknown       Event = "made_unknown"
	// EventResolved: an UNKNOWN record resolved; [Receipt.By] is the
	// operator, or [ByReconcile] when reconciliation resolved it.
	EventResolved Event = "resolved"
	EventDeleted  Event = "deleted"
	// EventToolPinned: an MCP upstream tool's definition was pinned (first
	// sight, or the definition a config pin names seen for the first
	// time); [Receipt.Definition] is its hash, [Receipt.By] how
	// (first_use, config).
	EventToolPinned Event = "tool_pinned"
	// EventToolAccepted: an operator ([Receipt.By]) accepted a changed
	// tool's new definition ([Receipt.Definition]).
	EventToolAccepted Event = "tool_accepted"
	// EventBudgetReserved: a claimed call reserved [Receipt.Amount] of
	// budget [Receipt.Budget] (one receipt per budget it charges).
	EventBudgetReserved Event = "budget_reserved"
	// EventBudgetCommitted: the call's record completed, or its UNKNOWN
	// record was resolved as executed (by an operator or reconciliation);
	// its amount stays counted in its window.
	EventBudgetCommitted Event = "budget_committed"
	// EventBudgetReleased: the call provably did not act (released by the
	// call path, deleted by an operator, dropped by reconciliation); its
	// amount was given back.
	EventBudgetReleased Event = "budget_released"
)

// ToolsChain is the chain of the tool pin events: a pin is the gateway's,
// not a tenant's. It cannot be a tenant's name (those start with a letter
// or digit).
const ToolsChain = "_tools"

// ByReconcile is [Receipt.By] of a record resolved by reconciliation rather
// than by an operator.
const ByReconcile = "reconcile"

// DefaultRetention is how long receipts are kept when receipts.retention is
// not configured.
const DefaultRetention = 30 * 24 * time.Hour

// Receipt is one event of a tenant's chain.
//
// Encoding: seq, time, tenant, event, prev and hash are always present
// (prev is "" on the first receipt of a chain); every other member is
// omitted when it is at its zero value ("" or a status of 0), so one
// receipt has exactly one JSON form and its JCS (RFC 8785) is
// deterministic. Time is written in UTC (RFC 3339, nanoseconds without
// trailing zeros).
type Receipt struct {
	// Seq is the receipt's position in its tenant's chain, from 1.
	Seq int64 `json:"seq"`
	// Time is when the writer sealed the receipt (its clock): chain order
	// is Seq, not Time.
	Time   time.Time `json:"time"`
	Tenant string    `json:"tenant"`
	Event  Event     `json:"event"`
	Tool   string    `json:"tool,omitempty"`
	// Key is [KeyHash] of the idempotency key, never the key itself.
	Key         string `json:"key,omitempty"`
	Session     string `json:"session,omitempty"`
	Step        string `json:"step,omitempty"`
	ExecutionID string `json:"execution_id,omitempty"`
	// Status is the HTTP status of an executed call (0: none).
	Status int `json:"status,omitempty"`
	// Decision is the decision taken: allow, approve or deny.
	Decision string `json:"decision,omitempty"`
	// Rule names the rule that decided, e.g. "decide[1]" for the second
	// rule of the tool's decide list.
	Rule string `json:"rule,omitempty"`
	// Policy is [PolicyHash] of the tool's decision config.
	Policy string `json:"policy,omitempty"`
	// Requester is the call's principal id (gateway/principal): who asked.
	// Receipts sealed before it existed have none.
	Requester string `json:"requester,omitempty"`
	// By is the decider's or operator's principal id, or [ByReconcile].
	By string `json:"by,omitempty"`
	// ClaimedBy is the name typed with the admin token (By is then
	// token:admin), kept beside By, never as it.
	ClaimedBy string `json:"claimed_by,omitempty"`
	// Note is a decision's note (a deny's reason).
	Note string `json:"note,omitempty"`
	// Definition is, for a tool pin event, the SHA-256 (hex) of the JCS
	// of the tool's definition (package pins).
	Definition string `json:"definition,omitempty"`
	// Observe is, in observe mode, the decision an enforced gateway would
	// have taken (the call ran as allowed).
	Observe string `json:"observe,omitempty"`
	// Budget and Amount are, for a budget event, the budget's name and
	// the amount in its unit (a decimal, e.g. "90.5").
	Budget string `json:"budget,omitempty"`
	Amount string `json:"amount,omitempty"`
	// Prev is the previous receipt's Hash in this tenant's chain.
	Prev string `json:"prev"`
	// Hash is the SHA-256 (hex) of the JCS of the receipt without hash.
	Hash string `json:"hash,omitempty"`
}

// KeyHash is what a receipt holds of an idempotency key: its SHA-256 in
// hex, enough to match a receipt to a key its holder knows, useless to
// replay it.
func KeyHash(key string) string {
	return sha256Hex([]byte(key))
}

// PolicyHash is [Receipt.Policy] of a tool's decision config, given in a
// canonical form the caller chooses once (e.g. the JCS of the config).
func PolicyHash(canonicalConfig []byte) string {
	return sha256Hex(canonicalConfig)
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
