"""The gateway's wire vocabulary, mirrored from the Go package ``wire``.

Header names, media types, problem codes, MCP ``_meta`` member names and the
MCP endpoint's JSON-RPC error codes. Each name is the Go constant's name in
UPPER_SNAKE case (``HeaderIdempotencyKey`` -> ``HEADER_IDEMPOTENCY_KEY``);
``tests/test_wire.py`` reads ``wire/wire.go`` and checks every value here
against it, so the two cannot drift apart.
"""

from typing import Final

# Request headers a client sends with a call.
HEADER_IDEMPOTENCY_KEY: Final = "Idempotency-Key"
HEADER_SESSION_ID: Final = "Agent-Session-Id"
HEADER_STEP_INDEX: Final = "Agent-Step-Index"
HEADER_AUTHORIZATION: Final = "Authorization"
HEADER_PREFER: Final = "Prefer"
PREFER_APPROVAL: Final = "approval"
HEADER_TRACEPARENT: Final = "Traceparent"

# Response headers of a call.
HEADER_REPLAYED: Final = "Idempotent-Replayed"
HEADER_EXECUTION_ID: Final = "Tool-Execution-Id"
HEADER_REQUEST_ID: Final = "X-Request-Id"
HEADER_RETRY_AFTER: Final = "Retry-After"
HEADER_PREFERENCE_APPLIED: Final = "Preference-Applied"
HEADER_EFFECT_KEY_REPLAYED: Final = "Effect-Key-Replayed"

# Headers the gateway sends to an HTTP upstream tool.
HEADER_FENCING_TOKEN: Final = "Fencing-Token"
HEADER_TENANT: Final = "Tool-Tenant"

#: Response header by which an HTTP upstream marks an error answer as not
#: executed (value OUTCOME_NOT_EXECUTED).
HEADER_OUTCOME: Final = "Toolgateway-Outcome"

# Media types.
MEDIA_TYPE_JSON: Final = "application/json"
MEDIA_TYPE_PROBLEM: Final = "application/problem+json"

#: Start of the "type" member of every problem document; the code follows.
PROBLEM_TYPE_PREFIX: Final = "urn:toolgateway:problem:"

# Problem codes (the "code" member of a problem document, and data.code of an
# MCP JSON-RPC error).
CODE_INVALID_JSON: Final = "invalid_json"
CODE_INVALID_ARGUMENTS: Final = "invalid_arguments"
CODE_IDEMPOTENCY_KEY_MISSING: Final = "idempotency_key_missing"
CODE_IDEMPOTENCY_KEY_MALFORMED: Final = "idempotency_key_malformed"
CODE_AGENT_SESSION_MISSING: Final = "agent_session_missing"
CODE_AGENT_SESSION_MALFORMED: Final = "agent_session_malformed"
CODE_AGENT_STEP_MISSING: Final = "agent_step_missing"
CODE_AGENT_STEP_MALFORMED: Final = "agent_step_malformed"
CODE_IDEMPOTENCY_METADATA_CONFLICT: Final = "idempotency_metadata_conflict"
CODE_UNAUTHORIZED: Final = "unauthorized"
CODE_TOOL_NOT_FOUND: Final = "tool_not_found"
CODE_RECORD_NOT_FOUND: Final = "record_not_found"
CODE_NOT_FOUND: Final = "not_found"
CODE_METHOD_NOT_ALLOWED: Final = "method_not_allowed"
CODE_REQUEST_IN_PROGRESS: Final = "request_in_progress"
CODE_OUTCOME_UNKNOWN: Final = "outcome_unknown"
CODE_RECORD_NOT_RESOLVABLE: Final = "record_not_resolvable"
CODE_INVALID_ADMIN_REQUEST: Final = "invalid_admin_request"
CODE_ADMIN_UNSUPPORTED: Final = "admin_unsupported"
CODE_CHAIN_DIVERGED: Final = "chain_diverged"
CODE_PAYLOAD_TOO_LARGE: Final = "payload_too_large"
CODE_UNSUPPORTED_MEDIA_TYPE: Final = "unsupported_media_type"
CODE_IDEMPOTENCY_KEY_MISMATCH: Final = "idempotency_key_mismatch"
CODE_IDEMPOTENCY_KEY_REUSED: Final = "idempotency_key_reused"
CODE_STEP_CONFLICT: Final = "step_conflict"
CODE_EFFECT_CONFLICT: Final = "effect_conflict"
CODE_BUDGET_EXCEEDED: Final = "budget_exceeded"
CODE_RATE_LIMITED: Final = "rate_limited"
CODE_TOOL_FAILED: Final = "tool_failed"
CODE_UPSTREAM_UNREACHABLE: Final = "upstream_unreachable"
CODE_UPSTREAM_RESPONSE_TOO_LARGE: Final = "upstream_response_too_large"
CODE_STORE_UNAVAILABLE: Final = "store_unavailable"
CODE_UPSTREAM_UNAVAILABLE: Final = "upstream_unavailable"
CODE_TOOL_TIMEOUT: Final = "tool_timeout"
CODE_APPROVAL_NOT_PENDING: Final = "approval_not_pending"
CODE_APPROVAL_NOT_YOURS: Final = "approval_not_yours"
CODE_CALL_DENIED: Final = "call_denied"
CODE_APPROVAL_PENDING: Final = "approval_pending"
CODE_APPROVAL_DENIED: Final = "approval_denied"
CODE_APPROVAL_EXPIRED: Final = "approval_expired"
CODE_NOT_AN_APPROVER: Final = "not_an_approver"
CODE_SELF_APPROVAL: Final = "self_approval"
CODE_APPROVAL_STALE: Final = "approval_stale"
CODE_TOOL_CHANGED: Final = "tool_changed"

#: Vendor prefix of every _meta member the gateway reads or writes over MCP.
META_PREFIX: Final = "io.github.toolgateway/"

# MCP _meta members: identity (read from a tools/call request), result
# (written on results) and upstream (sent to an MCP upstream tool).
META_SESSION_ID: Final = META_PREFIX + "sessionId"
META_STEP_INDEX: Final = META_PREFIX + "stepIndex"
META_IDEMPOTENCY_KEY: Final = META_PREFIX + "idempotencyKey"

META_EXECUTION_ID: Final = META_PREFIX + "executionId"
META_REPLAYED: Final = META_PREFIX + "replayed"
META_ERROR: Final = META_PREFIX + "error"
META_IDEMPOTENCY: Final = META_PREFIX + "idempotency"
META_IDENTITY: Final = META_PREFIX + "identity"

META_TENANT: Final = META_PREFIX + "tenant"
META_FENCING_TOKEN: Final = META_PREFIX + "fencingToken"
#: HEADER_OUTCOME for an MCP upstream (_meta of its error data or result).
META_OUTCOME: Final = META_PREFIX + "outcome"

#: Value of HEADER_OUTCOME and META_OUTCOME: the upstream did not act.
OUTCOME_NOT_EXECUTED: Final = "not-executed"

#: Value of META_IDEMPOTENCY on the result of an unkeyed call that ran
#: unprotected (mcp.allow_unkeyed).
META_IDEMPOTENCY_NONE: Final = "none"

#: Values of META_IDENTITY: the gateway's own identity keyed the call, or a
#: host's per-call id did (META_IDENTITY_HOST_PREFIX + the _meta member's
#: name, e.g. "host:claudecode/toolUseId").
META_IDENTITY_GATEWAY: Final = "gateway"
META_IDENTITY_HOST_PREFIX: Final = "host:"
#: ... or, for a call without identity, its fingerprint (person, tool,
#: arguments, dedupe window).
META_IDENTITY_FINGERPRINT: Final = "fingerprint"
#: The kind of a record's identity (the admin API's record member
#: "identity") when a host's per-call id keyed the call; the other kinds
#: are META_IDENTITY_GATEWAY and META_IDENTITY_FINGERPRINT.
RECORD_IDENTITY_HOST: Final = "host"
#: The prefix of a fingerprint-keyed call's session: "fp:" + the principal.
FINGERPRINT_SESSION_PREFIX: Final = "fp:"

# JSON-RPC error codes of the MCP endpoint.
RPC_INVALID_PARAMS: Final = -32602
RPC_REQUEST_IN_PROGRESS: Final = -32001
RPC_OUTCOME_UNKNOWN: Final = -32002
RPC_STORE_UNAVAILABLE: Final = -32003
#: rate_limited: retry the same call unchanged after data.retry_after_ms.
RPC_RATE_LIMITED: Final = -32029
#: upstream_unavailable (the tool's MCP server is not listed yet): nothing
#: ran; retry the same call unchanged after data.retry_after_ms.
RPC_UPSTREAM_UNAVAILABLE: Final = -32053
