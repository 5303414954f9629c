/**
 * The gateway's wire vocabulary: header names, problem codes, MCP `_meta`
 * member names and JSON-RPC error codes. These mirror the Go package `wire`
 * (wire/wire.go) name for name; test/wire.test.ts reads the Go file and
 * fails when a value here differs from Go's.
 *
 * @module
 */

// Request headers a client sends with a call.

/** The idempotency key of a call: 64 lowercase hex characters in derived mode. */
export const HeaderIdempotencyKey = "Idempotency-Key";
/** The agent run (session) a call belongs to. */
export const HeaderSessionID = "Agent-Session-Id";
/** The call's step index within its session, in decimal. */
export const HeaderStepIndex = "Agent-Step-Index";
/** `Bearer <token>` when the gateway has tenants configured. */
export const HeaderAuthorization = "Authorization";
/** `wait=N`: let the gateway wait up to N seconds for a call still in flight. */
export const HeaderPrefer = "Prefer";
/** The `Prefer` preference that opts a held call's `wait=N` into waiting for its approval's decision. */
export const PreferApproval = "approval";
/** W3C trace context. */
export const HeaderTraceparent = "Traceparent";

// Response headers of a call.

/** `true` when the answer is a replay of a recorded outcome. */
export const HeaderReplayed = "Idempotent-Replayed";
/** The ULID of the execution the answer comes from (the same on every replay). */
export const HeaderExecutionID = "Tool-Execution-Id";
/** A ULID minted by the gateway for every request. */
export const HeaderRequestID = "X-Request-Id";
/** Whole seconds to wait before the same request may succeed. */
export const HeaderRetryAfter = "Retry-After";
/** Echoes the `Prefer` preferences the gateway applied. */
export const HeaderPreferenceApplied = "Preference-Applied";
/** `true` on a replay of another call that holds the same effect key value. */
export const HeaderEffectKeyReplayed = "Effect-Key-Replayed";

// Headers the gateway sends to an HTTP upstream tool.

/** The claim's fencing token, a number that only grows for one record. */
export const HeaderFencingToken = "Fencing-Token";
/** The tenant a forwarded call belongs to. */
export const HeaderTenant = "Tool-Tenant";
/** Marks an upstream's error answer as not executed (value {@link OutcomeNotExecuted}). */
export const HeaderOutcome = "Toolgateway-Outcome";

// Media types.

/** Arguments and tool results. */
export const MediaTypeJSON = "application/json";
/** RFC 9457 problem documents: the gateway's errors. */
export const MediaTypeProblem = "application/problem+json";

/** Starts the `type` member of every problem document; the code follows it. */
export const ProblemTypePrefix = "urn:toolgateway:problem:";

// Problem codes: the `code` member of a problem document, and `data.code` of
// an MCP JSON-RPC error.

/** The body is not JSON or not I-JSON (400). */
export const CodeInvalidJSON = "invalid_json";
/** The arguments are not an object or violate the tool's schema (400). */
export const CodeInvalidArguments = "invalid_arguments";
/** No `Idempotency-Key` (400). */
export const CodeIdempotencyKeyMissing = "idempotency_key_missing";
/** A malformed `Idempotency-Key` (400). */
export const CodeIdempotencyKeyMalformed = "idempotency_key_malformed";
/** No `Agent-Session-Id` (400). */
export const CodeAgentSessionMissing = "agent_session_missing";
/** A malformed `Agent-Session-Id` (400). */
export const CodeAgentSessionMalformed = "agent_session_malformed";
/** No `Agent-Step-Index` (400). */
export const CodeAgentStepMissing = "agent_step_missing";
/** A malformed `Agent-Step-Index` (400). */
export const CodeAgentStepMalformed = "agent_step_malformed";
/** MCP: the `_meta` identity and the HTTP headers disagree. */
export const CodeIdempotencyMetadataConflict = "idempotency_metadata_conflict";
/** No or a wrong bearer token (401). */
export const CodeUnauthorized = "unauthorized";
/** No such tool (404). */
export const CodeToolNotFound = "tool_not_found";
/** Admin API: no such record (404). */
export const CodeRecordNotFound = "record_not_found";
/** No such path (404). */
export const CodeNotFound = "not_found";
/** Wrong HTTP method (405). */
export const CodeMethodNotAllowed = "method_not_allowed";
/** The same call is still running (409, with `Retry-After`): retry with the same key. */
export const CodeRequestInProgress = "request_in_progress";
/** The tool may or may not have acted; an operator must resolve it (409). Never retried. */
export const CodeOutcomeUnknown = "outcome_unknown";
/** Admin API: the record cannot be resolved (409). */
export const CodeRecordNotResolvable = "record_not_resolvable";
/** Admin API: a bad query parameter or resolve body (400). */
export const CodeInvalidAdminRequest = "invalid_admin_request";
/** Admin API: the store cannot search or resolve (501). */
export const CodeAdminUnsupported = "admin_unsupported";
/** The receipts chain does not extend the signed checkpoint it is checked against (admin API). */
export const CodeChainDiverged = "chain_diverged";
/** The body exceeds the gateway's limit (413). */
export const CodePayloadTooLarge = "payload_too_large";
/** The body is not `application/json` (415). */
export const CodeUnsupportedMediaType = "unsupported_media_type";
/** The key does not match the one derived from the headers and body (422). */
export const CodeIdempotencyKeyMismatch = "idempotency_key_mismatch";
/** The key was used before with other arguments (422). */
export const CodeIdempotencyKeyReused = "idempotency_key_reused";
/** The session's step already holds another call (422). */
export const CodeStepConflict = "step_conflict";
/** Another call holds the tool's effect key value with other arguments (409). */
export const CodeEffectConflict = "effect_conflict";
export const CodeBudgetExceeded = "budget_exceeded";
/** The tenant is over its rate or concurrency limit (429). */
export const CodeRateLimited = "rate_limited";
/** The tool failed; nothing was recorded (500). */
export const CodeToolFailed = "tool_failed";
/** The upstream tool could not be reached; nothing was recorded (502). */
export const CodeUpstreamUnreachable = "upstream_unreachable";
export const CodeUpstreamResponseTooLarge = "upstream_response_too_large";
/** The gateway's store is down; nothing ran (503). */
export const CodeStoreUnavailable = "store_unavailable";
/** An MCP upstream's tools are not listed yet (503). */
export const CodeUpstreamUnavailable = "upstream_unavailable";
/** The tool ran past its timeout; nothing was recorded (504). */
export const CodeToolTimeout = "tool_timeout";
/** Admin API and the caller's approval endpoint: the approval is already decided or expired (409; `state`, `decided_by`, `decided_at`). */
export const CodeApprovalNotPending = "approval_not_pending";
/** The caller's approval endpoint: another tenant's approval, or one an operator decides (403). */
export const CodeApprovalNotYours = "approval_not_yours";
/** The tool's decide rules deny the call; nothing ran (403). */
export const CodeCallDenied = "call_denied";
/** The call waits for a human's approval (409, with `Retry-After`, `approval_id`, `approval_expires_at`). */
export const CodeApprovalPending = "approval_pending";
/** The call's approval was denied (403, with `reason`, `by`). */
export const CodeApprovalDenied = "approval_denied";
/** The call's approval expired, pending or unused (403). */
export const CodeApprovalExpired = "approval_expired";
/** The decider may not decide this approval: no person (an agent's token on an `approver: caller` rule), or not one of the rule's approvers (403). */
export const CodeNotAnApprover = "not_an_approver";
/** The requester may not decide their own call (`approver: operator`, 403). */
export const CodeSelfApproval = "self_approval";
/** The rule or the tool changed since the approval: it is void and the next call asks anew (403). */
export const CodeApprovalStale = "approval_stale";
/** The tool is held: its MCP server changed its definition since it was pinned (409). */
export const CodeToolChanged = "tool_changed";

/** The vendor prefix of every `_meta` member the gateway reads or writes over MCP. */
export const MetaPrefix = "io.github.toolgateway/";

// MCP _meta members: identity members of a tools/call request, result
// members written on results, upstream members sent to an MCP upstream tool.

/** The call's session id (request `_meta`). */
export const MetaSessionID = MetaPrefix + "sessionId";
/** The call's step index, a JSON integer (request `_meta`). */
export const MetaStepIndex = MetaPrefix + "stepIndex";
/** The derived idempotency key (request `_meta`; optional in derived mode). */
export const MetaIdempotencyKey = MetaPrefix + "idempotencyKey";
/** The execution's ULID (result `_meta`). */
export const MetaExecutionID = MetaPrefix + "executionId";
/** Whether the result is a replay (result `_meta`). */
export const MetaReplayed = MetaPrefix + "replayed";
/** `{code, retryable}` of a tool result with `isError` the gateway produced (result `_meta`). */
export const MetaError = MetaPrefix + "error";
/** `"none"` on the result of an unkeyed call that ran unprotected (result `_meta`). */
export const MetaIdempotency = MetaPrefix + "idempotency";
/** The identity a keyed call was keyed on: `"gateway"` or `"host:<meta name>"` (result `_meta`). */
export const MetaIdentity = MetaPrefix + "identity";
/** The tenant of a call forwarded to an MCP upstream. */
export const MetaTenant = MetaPrefix + "tenant";
/** The fencing token of a call forwarded to an MCP upstream. */
export const MetaFencingToken = MetaPrefix + "fencingToken";
/** {@link HeaderOutcome} for an MCP upstream (`_meta` of its error data or result). */
export const MetaOutcome = MetaPrefix + "outcome";
/** The value of {@link HeaderOutcome} and {@link MetaOutcome}: the upstream did not act. */
export const OutcomeNotExecuted = "not-executed";

/** The value of {@link MetaIdempotency} on an unkeyed call's result. */
export const MetaIdempotencyNone = "none";
/** The value of {@link MetaIdentity} when the gateway's own identity keyed the call. */
export const MetaIdentityGateway = "gateway";
/** The prefix of {@link MetaIdentity} when a host's call id keyed the call (`"host:claudecode/toolUseId"`). */
export const MetaIdentityHostPrefix = "host:";
/** The value of {@link MetaIdentity} when a call without identity was keyed on its fingerprint (person, tool, arguments, dedupe window). */
export const MetaIdentityFingerprint = "fingerprint";
/** The kind of a record's identity (the admin API's record member `identity`) when a host's call id keyed the call; the other kinds are {@link MetaIdentityGateway} and {@link MetaIdentityFingerprint}. */
export const RecordIdentityHost = "host";
/** The prefix of a fingerprint-keyed call's session: `"fp:"` + the caller's principal. */
export const FingerprintSessionPrefix = "fp:";

// JSON-RPC error codes of the MCP endpoint.

/** Errors about the request (data.code says which). */
export const RPCInvalidParams = -32602;
/** The same call is still running. */
export const RPCRequestInProgress = -32001;
/** The tool may or may not have acted. */
export const RPCOutcomeUnknown = -32002;
/** The store is down; nothing ran. */
export const RPCStoreUnavailable = -32003;
/** The tenant's rate limit; retry the same call after data.retry_after_ms. */
export const RPCRateLimited = -32029;
/** The tool's MCP server is not listed yet; nothing ran; retry the same call after data.retry_after_ms. */
export const RPCUpstreamUnavailable = -32053;
