package gateway

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/toolgateway/toolgateway/wire"
)

// Problem is an RFC 9457 problem detail as the gateway sends it. Code is the
// stable machine-readable reason; Retryable tells a client whether the same
// request, unchanged, may succeed later. Build one with newProblem: the
// code alone decides type, title, status and retryable (problemCodes).
type Problem struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Detail    string `json:"detail,omitempty"`
	Code      string `json:"code"`
	Retryable bool   `json:"retryable"`
	// Errors lists schema violations (invalid_arguments only).
	Errors []wire.Violation `json:"errors,omitempty"`
	// Tool and ExecutionID name the earlier call of a step (step_conflict only).
	Tool        string `json:"tool,omitempty"`
	ExecutionID string `json:"execution_id,omitempty"`
	// ExpectedKey and CanonicalArguments are the key the gateway derived
	// and the JCS text it derived it from (idempotency_key_mismatch only).
	ExpectedKey        string `json:"expected_key,omitempty"`
	CanonicalArguments string `json:"canonical_arguments,omitempty"`

	// RetryAfter, when > 0, is the Retry-After in whole seconds (REST sends
	// the header, MCP data.retry_after_ms).
	RetryAfter int `json:"-"`
	// allow is sent as the Allow header (405 only).
	allow string
}

// problemCode is everything fixed about one problem code.
type problemCode struct {
	status    int
	title     string // fixed, so a title never carries user input
	retryable bool
	label     string // the metrics outcome label of a request refused with it
}

// problemCodes is the one table of the contract's problem codes: a new
// error is one line here.
var problemCodes = map[string]problemCode{
	wire.CodeInvalidJSON:                 {http.StatusBadRequest, "Request body is not valid I-JSON", false, labelInvalid},
	wire.CodeInvalidArguments:            {http.StatusBadRequest, "Arguments do not match the tool's schema", false, labelInvalid},
	wire.CodeIdempotencyKeyMissing:       {http.StatusBadRequest, "Idempotency-Key header is missing", false, labelInvalid},
	wire.CodeIdempotencyKeyMalformed:     {http.StatusBadRequest, "Idempotency-Key header is malformed", false, labelInvalid},
	wire.CodeAgentSessionMissing:         {http.StatusBadRequest, "Agent-Session-Id header is missing", false, labelInvalid},
	wire.CodeAgentSessionMalformed:       {http.StatusBadRequest, "Agent-Session-Id header is malformed", false, labelInvalid},
	wire.CodeAgentStepMissing:            {http.StatusBadRequest, "Agent-Step-Index header is missing", false, labelInvalid},
	wire.CodeAgentStepMalformed:          {http.StatusBadRequest, "Agent-Step-Index header is malformed", false, labelInvalid},
	wire.CodeIdempotencyMetadataConflict: {http.StatusBadRequest, "The call's identity differs between _meta and headers", false, labelInvalid},
	wire.CodeUnauthorized:                {http.StatusUnauthorized, "Missing or invalid bearer token", false, labelUnauthorized},
	wire.CodeToolNotFound:                {http.StatusNotFound, "Tool not found", false, labelNotFound},
	wire.CodeRecordNotFound:              {http.StatusNotFound, "Record not found", false, labelNotFound},
	wire.CodeNotFound:                    {http.StatusNotFound, "Not found", false, labelNotFound},
	wire.CodeMethodNotAllowed:            {http.StatusMethodNotAllowed, "Method not allowed", false, labelInvalid},
	wire.CodeRequestInProgress:           {http.StatusConflict, "A request with this key is in progress", true, labelInProgress},
	wire.CodeOutcomeUnknown:              {http.StatusConflict, "The outcome of this call is unknown", false, labelOutcomeUnknown},
	wire.CodeRecordNotResolvable:         {http.StatusConflict, "The record cannot be resolved in its state", false, labelInvalid},
	wire.CodeInvalidAdminRequest:         {http.StatusBadRequest, "The admin request is invalid", false, labelInvalid},
	wire.CodeAdminUnsupported:            {http.StatusNotImplemented, "The idempotency store does not support this admin operation", false, labelOther},
	wire.CodePayloadTooLarge:             {http.StatusRequestEntityTooLarge, "Request body too large", false, labelInvalid},
	wire.CodeUnsupportedMediaType:        {http.StatusUnsupportedMediaType, "Content-Type must be application/json", false, labelInvalid},
	wire.CodeIdempotencyKeyMismatch:      {http.StatusUnprocessableEntity, "Idempotency-Key does not match the derived key", false, labelKeyMismatch},
	wire.CodeIdempotencyKeyReused:        {http.StatusUnprocessableEntity, "Idempotency-Key was used with other arguments", false, labelKeyReused},
	wire.CodeStepConflict:                {http.StatusUnprocessableEntity, "This agent step already made another call", false, labelStepConflict},
	wire.CodeRateLimited:                 {http.StatusTooManyRequests, "Rate limit exceeded", true, labelRateLimited},
	wire.CodeToolFailed:                  {http.StatusInternalServerError, "The tool failed", true, labelToolError},
	wire.CodeUpstreamUnreachable:         {http.StatusBadGateway, "The tool's upstream is unreachable", true, labelToolError},
	wire.CodeUpstreamResponseTooLarge:    {http.StatusBadGateway, "The tool's upstream answered with too large a result", false, labelToolError},
	wire.CodeStoreUnavailable:            {http.StatusServiceUnavailable, "The idempotency store is unavailable", true, labelStoreError},
	wire.CodeUpstreamUnavailable:         {http.StatusServiceUnavailable, "The tool's upstream is not available yet", true, labelToolError},
	wire.CodeToolTimeout:                 {http.StatusGatewayTimeout, "The tool timed out", true, labelToolError},
}

// newProblem builds the problem for code; everything but the detail comes
// from problemCodes. An unlisted code is a programming error and becomes a
// retryable 500 rather than a malformed answer.
func newProblem(code, detail string) *Problem {
	pc, ok := problemCodes[code]
	if !ok {
		pc = problemCode{http.StatusInternalServerError, "Internal error", true, labelOther}
	}
	return &Problem{
		Type:      wire.ProblemTypePrefix + code,
		Title:     pc.title,
		Status:    pc.status,
		Detail:    detail,
		Code:      code,
		Retryable: pc.retryable,
	}
}

// label is the metrics outcome label of a request refused with p.
func (p *Problem) label() string {
	if pc, ok := problemCodes[p.Code]; ok {
		return pc.label
	}
	return labelOther
}

// withRetryAfter sets the Retry-After seconds (at least 1).
func (p *Problem) withRetryAfter(seconds int) *Problem {
	p.RetryAfter = max(seconds, 1)
	return p
}

// withoutRetry marks this answer not retryable although its code usually
// is: an uncertain outcome of a lease_expiry: unknown tool keeps its code
// (tool_timeout, tool_failed, upstream_unreachable) but a retry would only
// meet the UNKNOWN record.
func (p *Problem) withoutRetry() *Problem {
	p.Retryable = false
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
	h.Set("Content-Type", wire.MediaTypeProblem)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if p.RetryAfter > 0 {
		h.Set(wire.HeaderRetryAfter, strconv.Itoa(p.RetryAfter))
	}
	if p.allow != "" {
		h.Set("Allow", p.allow)
	}
	w.WriteHeader(p.Status)
	_, _ = w.Write(body)
}
