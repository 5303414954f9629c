// Package tools defines what a tool is to the gateway: the Tool interface,
// the request a tool receives and the response it returns, and the registry
// that plugins add themselves to from init, the way database/sql drivers do.
//
// Package tools never imports the gateway: a plugin depends on this package
// only, so it can live in its own module.
package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Tool is one callable tool. Implementations must be safe for concurrent use:
// the gateway calls Call from many goroutines at once.
type Tool interface {
	// Spec describes the tool: its name, description, input schema and policy.
	Spec() Spec
	// Call runs the tool once. ctx is cancelled when the tool's timeout
	// expires, when the gateway loses the lease on the idempotency record
	// (another gateway may then run the tool; use Request.FencingToken to
	// reject the stale writer in the backend), or when a shutdown's drain
	// runs out of time. A client that hangs up does NOT cancel a mutating
	// call: once claimed, the tool runs to the end so its outcome can be
	// recorded and replayed to the client's retry. Only a read-only tool's
	// ctx ends with the client's request (nothing is recorded for it).
	//
	// A returned Response with a status of 2xx–4xx (but 408, 425, 429) is
	// recorded and replayed to every retry of the same call; a 408, 425,
	// 429 or 5xx response or an error is not recorded, so a retry runs the
	// tool again — except where the outcome is uncertain for a
	// lease_expiry: unknown tool (ErrOutcomeUncertain, an upstream's
	// answer without proof that it did not act: a Response.Relayed 5xx not
	// NotExecuted, a relayed 408/425/429 not in
	// Policy.NotExecutedStatuses, ErrUpstreamRejected without
	// ErrNotExecuted): then the record stays UNKNOWN.
	Call(ctx context.Context, req *Request) (*Response, error)
}

// Spec is the static description of a tool.
type Spec struct {
	// Name matches ^[a-z0-9][a-z0-9_-]{0,63}$ and is the {tool} of the URL.
	Name string
	// Description is shown to models in discovery.
	Description string
	// InputSchema is the JSON Schema (draft 2020-12 unless it says otherwise
	// with $schema) the arguments must satisfy. Empty means "any object".
	InputSchema json.RawMessage
	// ReadOnly tools need no idempotency key: nothing is stored and the tool
	// runs on every call.
	ReadOnly bool
	// Transactional tools run inside a transaction on the idempotency
	// store's database (Request.Tx), and the gateway records the outcome in
	// that same transaction: the tool's writes and the replayable record
	// commit together or not at all. Only the PostgreSQL store offers it;
	// with another store a transactional tool is a configuration error.
	Transactional bool
	// ResultIsCallToolResult says that the Body of every Response this tool
	// returns is the JSON of an MCP CallToolResult (the tool fronts an MCP
	// server, package tools/mcptool). REST sends that body as it is; the MCP
	// endpoint passes it through unchanged as the tools/call result (adding
	// only the gateway's _meta) instead of wrapping the body in a text
	// content block, on the first answer and on every replay.
	ResultIsCallToolResult bool
	// Target names where the tool runs, for the approvals bound to its
	// definition: an HTTP upstream's URL (its password redacted), an MCP
	// upstream's server URL or command and the tool's name there; "" for
	// an in-process tool.
	Target string
	// Policy is the execution policy the tool brings with it. Tools that
	// appear at run time (an MCP server's) have no entry under tools: in the
	// config, so their policy travels with their spec. A configured policy
	// for the same name wins field by field; zero fields take the gateway's
	// defaults.
	Policy Policy
}

// Tx is the transaction a transactional tool runs in. It is opaque here so
// that this package stays free of database drivers: an adapter package for
// the store's driver hands the tool the typed transaction (tools/pgxtx for
// the PostgreSQL store: pgxtx.From(req) returns a pgx.Tx). The tool must
// not commit or roll it back; the gateway does, with the outcome.
type Tx interface {
	// Driver names the transaction's kind, e.g. "pgx/v5".
	Driver() string
}

// Policy is a tool's execution policy, the one type for it: configured
// under tools: (or mcp_servers:), or brought by the tool in its Spec. The
// zero value means "the gateway's defaults" for every field.
type Policy struct {
	// Timeout bounds one execution (default 30s).
	Timeout time.Duration
	// ReplayTTL is how long a completed outcome is replayed, and an UNKNOWN
	// record kept (default 24h).
	ReplayTTL time.Duration
	// LeaseExpiry is what happens to a call whose outcome is uncertain;
	// empty means LeaseExpiryRerun.
	LeaseExpiry LeaseExpiry
	// EffectKey is the tool's effect_key template, e.g.
	// "refund:{/txn_id}" (RFC 6901 pointers into the canonical
	// arguments): one execution per value, whatever the idempotency key.
	// Empty: none. The gateway compiles and checks it.
	EffectKey string
	// NotExecutedStatuses (not_executed_statuses) are the statuses among
	// TransientStatuses (408, 425, 429) that count, when an upstream
	// answers them (Response.Relayed), as evidence that it did not act: the
	// call is released and a retry runs the tool again. Left out, the
	// default of the lease expiry: all three for LeaseExpiryRerun (which
	// releases an uncertain outcome anyway), none for LeaseExpiryUnknown —
	// an upstream or a proxy may answer 429 after acting, so for a tool
	// that must never run twice such an answer leaves the record UNKNOWN.
	// An empty list means none.
	NotExecutedStatuses StatusSet
}

// StatusNotExecuted reports whether a relayed answer with status counts
// as evidence that the upstream did not act (see NotExecutedStatuses).
func (p Policy) StatusNotExecuted(status int) bool {
	if p.NotExecutedStatuses.Listed() {
		return p.NotExecutedStatuses.Contains(status)
	}
	return p.LeaseExpiry != LeaseExpiryUnknown && slices.Contains(TransientStatuses, status)
}

// Validate checks p: no negative duration, a known lease expiry.
func (p Policy) Validate() error {
	if p.Timeout < 0 || p.ReplayTTL < 0 {
		return fmt.Errorf("timeout %v and replay_ttl %v must not be negative", p.Timeout, p.ReplayTTL)
	}
	if err := p.LeaseExpiry.Validate(); err != nil {
		return fmt.Errorf("lease_expiry: %w", err)
	}
	return nil
}

// Or returns p with every zero field taken from fallback: a configured
// policy wins field by field over the one a tool brings.
func (p Policy) Or(fallback Policy) Policy {
	if p.Timeout == 0 {
		p.Timeout = fallback.Timeout
	}
	if p.ReplayTTL == 0 {
		p.ReplayTTL = fallback.ReplayTTL
	}
	if p.LeaseExpiry == "" {
		p.LeaseExpiry = fallback.LeaseExpiry
	}
	if p.EffectKey == "" {
		p.EffectKey = fallback.EffectKey
	}
	if !p.NotExecutedStatuses.Listed() {
		p.NotExecutedStatuses = fallback.NotExecutedStatuses
	}
	return p
}

// LeaseExpiry (lease_expiry in the config) says what happens to a call
// whose outcome is uncertain: its gateway died while it ran (its lease
// expired), or, for LeaseExpiryUnknown, its timeout, its cancellation by a
// drain or an upstream that gave no answer (ErrOutcomeUncertain) left open
// whether it acted.
type LeaseExpiry string

// The lease expiry policies.
const (
	// LeaseExpiryRerun (the default) runs the tool again: after a lease
	// expiry the next claim takes the record over; after an uncertain
	// outcome the record is deleted.
	LeaseExpiryRerun LeaseExpiry = "rerun"
	// LeaseExpiryUnknown is for tools that must never run twice (payments):
	// the record becomes UNKNOWN, every retry answers 409 outcome_unknown,
	// and an operator decides.
	LeaseExpiryUnknown LeaseExpiry = "unknown"
)

// Validate accepts the two policies and "" (the default, rerun).
func (e LeaseExpiry) Validate() error {
	switch e {
	case "", LeaseExpiryRerun, LeaseExpiryUnknown:
		return nil
	}
	return fmt.Errorf("%q: want %s or %s", string(e), LeaseExpiryRerun, LeaseExpiryUnknown)
}

// Request is what a tool receives for one execution.
type Request struct {
	// Arguments are the exact bytes the client sent (a JSON object that has
	// already been validated against the tool's schema).
	Arguments json.RawMessage
	// Tenant is the authenticated caller ("anonymous" without auth).
	Tenant string
	// SessionID and StepIndex come from Agent-Session-Id / Agent-Step-Index;
	// HasStep reports whether they were sent.
	SessionID string
	StepIndex uint64
	HasStep   bool
	// IdempotencyKey is the (unquoted) key of the call as the client sent
	// it; empty for read-only tools. Two tenants can send the same key: do
	// not deduplicate on it in a backend shared by tenants, use ScopedKey.
	IdempotencyKey string
	// ScopedKey is lowercase_hex(SHA-256(tenant ":" tool ":" key)): the key
	// scoped like the gateway's record (keyderive.ScopedKey). It is what an
	// HTTP upstream receives as Idempotency-Key; pass it to your backend as
	// its deduplication key. Empty for read-only tools.
	ScopedKey string
	// ExecutionID is the ULID minted when the call was claimed; a replay
	// returns it to the client again.
	ExecutionID string
	// FencingToken grows with every claim of the same idempotency record. A
	// backend that remembers the largest token it has seen for a key can
	// reject writes from an older owner whose lease was lost. Zero for
	// read-only tools.
	FencingToken int64
	// Tx is the call's transaction for a transactional tool (Spec.Transactional),
	// nil otherwise.
	Tx Tx
	// AcceptsInputRequests says that the client can answer an upstream's
	// requests for input (an MCP client of protocol 2026-07-28 or later:
	// multi round-trip requests). A tool of an MCP upstream then returns the
	// upstream's input_required result as a Response with InputRequired
	// set; otherwise (REST) such a result is a failure.
	AcceptsInputRequests bool
	// Continuation is the client's answer to an upstream's input requests
	// (the next round of a multi round-trip call); nil on a first round.
	Continuation *Continuation
}

// Continuation carries a multi round-trip MCP call's next round: the
// client's inputResponses (the raw JSON object) and the requestState the
// upstream asked it to echo.
type Continuation struct {
	InputResponses json.RawMessage
	RequestState   string
}

// Response is the outcome of a tool that ran to the end.
type Response struct {
	// Status is the HTTP status the client receives: a final status,
	// 200–599 (FinalStatus). Any other is a failure of the tool; of a
	// relayed answer, an uncertain outcome (the upstream took the request).
	Status int
	// ContentType defaults to application/json when empty.
	ContentType string
	// Body is sent unchanged, and replayed byte for byte.
	Body []byte
	// InputRequired marks an answer that is not an outcome: the upstream
	// needs input from the client before it acts (an MCP input_required
	// result, Body its JSON). The gateway records nothing, releases the
	// call's claim and hands Body to the client, whose next round is a new
	// call with the same identity. Only returned when
	// Request.AcceptsInputRequests.
	InputRequired bool
	// Relayed marks an answer relayed from an upstream (an HTTP upstream's
	// status and body, an MCP server's result) rather than the tool's own
	// word. A relayed 5xx is no evidence that nothing happened: the upstream
	// may have acted and then failed, or a proxy in front of it answered.
	// So for a lease_expiry: unknown tool the gateway leaves the record
	// UNKNOWN, unless NotExecuted. An in-process tool leaves it false: its
	// 5xx is its own word that it did nothing (one that cannot tell returns
	// an error wrapping ErrOutcomeUncertain).
	Relayed bool
	// NotExecuted says that the upstream marked its answer as not executed
	// (HTTP header wire.HeaderOutcome, MCP _meta wire.MetaOutcome, value
	// wire.OutcomeNotExecuted): a relayed 5xx then releases the call, and a
	// retry runs the tool again.
	NotExecuted bool
}

// JSON builds a Response with an application/json body from v.
func JSON(status int, v any) (*Response, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &Response{Status: status, ContentType: "application/json", Body: b}, nil
}
