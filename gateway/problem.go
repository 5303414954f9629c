package gateway

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// Problem is an RFC 9457 problem detail as the gateway sends it. Code is the
// stable machine-readable reason; Retryable tells a client whether the same
// request, unchanged, may succeed later.
type Problem struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Detail    string `json:"detail,omitempty"`
	Code      string `json:"code"`
	Retryable bool   `json:"retryable"`
	// Errors lists schema violations (invalid_arguments only).
	Errors []Violation `json:"errors,omitempty"`
	// Tool and ExecutionID name the earlier call of a step (step_conflict only).
	Tool        string `json:"tool,omitempty"`
	ExecutionID string `json:"execution_id,omitempty"`

	// retryAfter, when > 0, is sent as the Retry-After header in seconds.
	retryAfter int
	// allow is sent as the Allow header (405 only).
	allow string
}

// Violation is one schema violation: a JSON Pointer into the arguments and
// what is wrong there.
type Violation struct {
	Location string `json:"location"`
	Message  string `json:"message"`
}

// The problem codes of the contract.
const (
	CodeInvalidJSON             = "invalid_json"
	CodeInvalidArguments        = "invalid_arguments"
	CodeIdempotencyKeyMissing   = "idempotency_key_missing"
	CodeIdempotencyKeyMalformed = "idempotency_key_malformed"
	CodeAgentSessionMissing     = "agent_session_missing"
	CodeAgentSessionMalformed   = "agent_session_malformed"
	CodeAgentStepMissing        = "agent_step_missing"
	CodeAgentStepMalformed      = "agent_step_malformed"
	CodeUnauthorized            = "unauthorized"
	CodeToolNotFound            = "tool_not_found"
	CodeRecordNotFound          = "record_not_found"
	CodeNotFound                = "not_found"
	CodeMethodNotAllowed        = "method_not_allowed"
	CodeRequestInProgress       = "request_in_progress"
	CodeOutcomeUnknown          = "outcome_unknown"
	CodePayloadTooLarge         = "payload_too_large"
	CodeUnsupportedMediaType    = "unsupported_media_type"
	CodeIdempotencyKeyMismatch  = "idempotency_key_mismatch"
	CodeIdempotencyKeyReused    = "idempotency_key_reused"
	CodeStepConflict            = "step_conflict"
	CodeToolFailed              = "tool_failed"
	CodeUpstreamUnreachable     = "upstream_unreachable"
	CodeStoreUnavailable        = "store_unavailable"
	CodeToolTimeout             = "tool_timeout"
)

// problemTitles holds one fixed title per code, so titles never carry user input.
var problemTitles = map[string]string{
	CodeInvalidJSON:             "Request body is not valid I-JSON",
	CodeInvalidArguments:        "Arguments do not match the tool's schema",
	CodeIdempotencyKeyMissing:   "Idempotency-Key header is missing",
	CodeIdempotencyKeyMalformed: "Idempotency-Key header is malformed",
	CodeAgentSessionMissing:     "Agent-Session-Id header is missing",
	CodeAgentSessionMalformed:   "Agent-Session-Id header is malformed",
	CodeAgentStepMissing:        "Agent-Step-Index header is missing",
	CodeAgentStepMalformed:      "Agent-Step-Index header is malformed",
	CodeUnauthorized:            "Missing or invalid bearer token",
	CodeToolNotFound:            "Tool not found",
	CodeRecordNotFound:          "Record not found",
	CodeNotFound:                "Not found",
	CodeMethodNotAllowed:        "Method not allowed",
	CodeRequestInProgress:       "A request with this key is in progress",
	CodeOutcomeUnknown:          "The outcome of this call is unknown",
	CodePayloadTooLarge:         "Request body too large",
	CodeUnsupportedMediaType:    "Content-Type must be application/json",
	CodeIdempotencyKeyMismatch:  "Idempotency-Key does not match the derived key",
	CodeIdempotencyKeyReused:    "Idempotency-Key was used with other arguments",
	CodeStepConflict:            "This agent step already made another call",
	CodeToolFailed:              "The tool failed",
	CodeUpstreamUnreachable:     "The tool's upstream is unreachable",
	CodeStoreUnavailable:        "The idempotency store is unavailable",
	CodeToolTimeout:             "The tool timed out",
}

// retryableCodes are the codes for which the same request may succeed later.
var retryableCodes = map[string]bool{
	CodeRequestInProgress:   true,
	CodeStoreUnavailable:    true,
	CodeToolTimeout:         true,
	CodeUpstreamUnreachable: true,
	CodeToolFailed:          true,
}

// newProblem builds the problem for code with the given status and detail.
func newProblem(status int, code, detail string) *Problem {
	return &Problem{
		Type:      "urn:toolgateway:problem:" + code,
		Title:     problemTitles[code],
		Status:    status,
		Detail:    detail,
		Code:      code,
		Retryable: retryableCodes[code],
	}
}

// withRetryAfter sets the Retry-After seconds (at least 1).
func (p *Problem) withRetryAfter(seconds int) *Problem {
	p.retryAfter = max(seconds, 1)
	return p
}

// writeProblem sends p as application/problem+json.
func writeProblem(w http.ResponseWriter, p *Problem) {
	body, err := json.Marshal(p)
	if err != nil {
		// A Problem holds only strings and ints; this cannot fail, but never
		// send an empty 200 if it somehow does.
		body = []byte(`{"type":"about:blank","title":"Internal error","status":500,"code":"internal_error","retryable":true}`)
		p.Status = http.StatusInternalServerError
	}
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if p.retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(p.retryAfter))
	}
	if p.allow != "" {
		h.Set("Allow", p.allow)
	}
	w.WriteHeader(p.Status)
	_, _ = w.Write(body)
}
