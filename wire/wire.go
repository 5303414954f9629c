// Package wire holds the gateway's wire vocabulary: header names, problem
// codes, MCP _meta member names and JSON-RPC error codes. The server, the Go
// SDK and the HTTP upstream tool import it; the Python and TypeScript SDKs
// mirror it, and a test compares their constants with these. It has no
// dependencies, so importing it costs nothing.
package wire

// Request headers a client sends with a call.
const (
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderSessionID      = "Agent-Session-Id"
	HeaderStepIndex      = "Agent-Step-Index"
	HeaderAuthorization  = "Authorization"
	HeaderPrefer         = "Prefer"
	HeaderTraceparent    = "Traceparent"
)

// Response headers of a call.
const (
	HeaderReplayed          = "Idempotent-Replayed"
	HeaderExecutionID       = "Tool-Execution-Id"
	HeaderRequestID         = "X-Request-Id"
	HeaderRetryAfter        = "Retry-After"
	HeaderPreferenceApplied = "Preference-Applied"
	// PreferApproval is the Prefer preference (no value) that opts a call
	// held for an approval into its wait=N: without it, approval_pending
	// answers at once whatever wait=N says (a human answers in minutes,
	// not while a request is open), e.g. "Prefer: wait=30, approval".
	PreferApproval = "approval"
	// HeaderEffectKeyReplayed is "true" on a replay of another call that
	// holds the same effect key value (another key, session or step).
	HeaderEffectKeyReplayed = "Effect-Key-Replayed"
)

// Headers the gateway sends to an HTTP upstream tool (besides the key and
// the Agent-* headers above; the Idempotency-Key it forwards is the
// tenant-scoped key).
const (
	HeaderFencingToken = "Fencing-Token"
	HeaderTenant       = "Tool-Tenant"
)

// HeaderOutcome is the response header by which an HTTP upstream marks an
// error answer (5xx) as OutcomeNotExecuted: it did not act, so the gateway
// may release the call of a lease_expiry: unknown tool and let a retry run
// it. Without it such an answer is no evidence that nothing happened; so
// too with more than one value (two headers, a comma list), or another.
const HeaderOutcome = "Toolgateway-Outcome"

// Media types.
const (
	MediaTypeJSON    = "application/json"
	MediaTypeProblem = "application/problem+json"
)

// ProblemTypePrefix starts the "type" member of every problem document; the
// code follows it.
const ProblemTypePrefix = "urn:toolgateway:problem:"

// Problem codes (the "code" member of a problem document, and data.code of
// an MCP JSON-RPC error).
const (
	CodeInvalidJSON                 = "invalid_json"
	CodeInvalidArguments            = "invalid_arguments"
	CodeIdempotencyKeyMissing       = "idempotency_key_missing"
	CodeIdempotencyKeyMalformed     = "idempotency_key_malformed"
	CodeAgentSessionMissing         = "agent_session_missing"
	CodeAgentSessionMalformed       = "agent_session_malformed"
	CodeAgentStepMissing            = "agent_step_missing"
	CodeAgentStepMalformed          = "agent_step_malformed"
	CodeIdempotencyMetadataConflict = "idempotency_metadata_conflict"
	CodeUnauthorized                = "unauthorized"
	CodeToolNotFound                = "tool_not_found"
	CodeRecordNotFound              = "record_not_found"
	CodeNotFound                    = "not_found"
	CodeMethodNotAllowed            = "method_not_allowed"
	CodeRequestInProgress           = "request_in_progress"
	CodeOutcomeUnknown              = "outcome_unknown"
	CodeRecordNotResolvable         = "record_not_resolvable"
	CodeInvalidAdminRequest         = "invalid_admin_request"
	CodeAdminUnsupported            = "admin_unsupported"
	CodeChainDiverged               = "chain_diverged"
	CodePayloadTooLarge             = "payload_too_large"
	CodeUnsupportedMediaType        = "unsupported_media_type"
	CodeIdempotencyKeyMismatch      = "idempotency_key_mismatch"
	CodeIdempotencyKeyReused        = "idempotency_key_reused"
	CodeStepConflict                = "step_conflict"
	CodeEffectConflict              = "effect_conflict"
	CodeBudgetExceeded              = "budget_exceeded"
	CodeRateLimited                 = "rate_limited"
	CodeToolFailed                  = "tool_failed"
	CodeUpstreamUnreachable         = "upstream_unreachable"
	CodeUpstreamResponseTooLarge    = "upstream_response_too_large"
	CodeStoreUnavailable            = "store_unavailable"
	CodeUpstreamUnavailable         = "upstream_unavailable"
	CodeToolTimeout                 = "tool_timeout"
	CodeApprovalNotPending          = "approval_not_pending"
	CodeApprovalNotYours            = "approval_not_yours"
	CodeCallDenied                  = "call_denied"
	CodeApprovalPending             = "approval_pending"
	CodeApprovalDenied              = "approval_denied"
	CodeApprovalExpired             = "approval_expired"
	CodeNotAnApprover               = "not_an_approver"
	CodeSelfApproval                = "self_approval"
	CodeApprovalStale               = "approval_stale"
	// CodeToolChanged: the tool is held, its definition changed since it
	// was pinned (409, not retryable; docs/tools.md, "Pins").
	CodeToolChanged = "tool_changed"
)

// MetaPrefix is the vendor prefix of every _meta member the gateway reads
// or writes over MCP.
const MetaPrefix = "io.github.toolgateway/"

// MCP _meta members. The identity members are read from a tools/call
// request; the result members are written on results; the upstream members
// are sent to an MCP upstream tool with a forwarded call.
const (
	MetaSessionID      = MetaPrefix + "sessionId"
	MetaStepIndex      = MetaPrefix + "stepIndex"
	MetaIdempotencyKey = MetaPrefix + "idempotencyKey"

	MetaExecutionID = MetaPrefix + "executionId"
	MetaReplayed    = MetaPrefix + "replayed"
	MetaError       = MetaPrefix + "error"
	MetaIdempotency = MetaPrefix + "idempotency"
	MetaIdentity    = MetaPrefix + "identity"

	MetaTenant       = MetaPrefix + "tenant"
	MetaFencingToken = MetaPrefix + "fencingToken"

	// MetaOutcome is HeaderOutcome for an MCP upstream: a member of the
	// _meta of its JSON-RPC error's data, or of an isError result.
	MetaOutcome = MetaPrefix + "outcome"
)

// OutcomeNotExecuted is the value of HeaderOutcome and MetaOutcome by which
// an upstream says that it did not act on the call.
const OutcomeNotExecuted = "not-executed"

// MetaIdempotencyNone is the value of MetaIdempotency on the result of an
// unkeyed call that ran unprotected (mcp.allow_unkeyed).
const MetaIdempotencyNone = "none"

// Values of MetaIdentity, which names the identity a keyed call's result
// was keyed on: the gateway's own (session and step, or a key), or a
// host's per-call id (MetaIdentityHostPrefix + the _meta member's name,
// e.g. "host:claudecode/toolUseId"), or the fingerprint of a call that
// carried no identity (contract section 21: principal, tool, arguments
// and dedupe window).
const (
	MetaIdentityGateway     = "gateway"
	MetaIdentityHostPrefix  = "host:"
	MetaIdentityFingerprint = "fingerprint"
)

// RecordIdentityHost is the kind of a record's identity (the admin API's
// record member "identity") when a host's per-call id keyed its call;
// the other kinds are MetaIdentityGateway and MetaIdentityFingerprint.
const RecordIdentityHost = "host"

// FingerprintSessionPrefix prefixes the session of a fingerprint-keyed
// call: "fp:" + the caller's principal.
const FingerprintSessionPrefix = "fp:"

// JSON-RPC error codes of the MCP endpoint.
const (
	RPCInvalidParams     = -32602
	RPCRequestInProgress = -32001
	RPCOutcomeUnknown    = -32002
	RPCStoreUnavailable  = -32003
	// RPCRateLimited is rate_limited (the tenant's rate or in-flight limit):
	// a server error of its own rather than -32602, which says the params
	// are wrong and must not be retried as they are, while this call may be
	// retried unchanged after data.retry_after_ms. 29 as in HTTP 429; the
	// codes -32001 to -32005 mean something else to go-sdk's client
	// (-32004 "server is closing" would read as a closed connection).
	RPCRateLimited = -32029
	// RPCUpstreamUnavailable is upstream_unavailable (the tool's MCP
	// server is not listed yet): nothing ran, retry the same call after
	// data.retry_after_ms. 53 as in HTTP 503, outside go-sdk's -32001 to
	// -32005 for the same reason as RPCRateLimited.
	RPCUpstreamUnavailable = -32053
)

// Violation is one schema violation of invalid_arguments: a JSON Pointer
// into the arguments ("" for the root) and what is wrong there.
type Violation struct {
	Location string `json:"location"`
	Message  string `json:"message"`
}
