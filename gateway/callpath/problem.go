package callpath

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/toolgateway/toolgateway/wire"
)

// Problem is an RFC 9457 problem detail as the gateway sends it. Code is the
// stable machine-readable reason; Retryable tells a client whether the same
// request, unchanged, may succeed later. Build one with NewProblem: the
// code alone decides type, title, status and retryable (problemCodes);
// WithRetryable overrides retryable for one answer.
type Problem struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Detail    string `json:"detail,omitempty"`
	Code      string `json:"code"`
	Retryable bool   `json:"retryable"`
	// Errors lists schema violations (invalid_arguments only).
	Errors []wire.Violation `json:"errors,omitempty"`
	// Tool and ExecutionID name the earlier call of a step (step_conflict);
	// ExecutionID and State name the call holding an effect key value
	// (effect_conflict); State is also where an approval stands
	// (approval_not_pending, with DecidedBy and DecidedAt).
	Tool        string `json:"tool,omitempty"`
	ExecutionID string `json:"execution_id,omitempty"`
	State       string `json:"state,omitempty"`
	// ExpectedKey and CanonicalArguments are the key the gateway derived
	// and the JCS text it derived it from (idempotency_key_mismatch only).
	ExpectedKey        string `json:"expected_key,omitempty"`
	CanonicalArguments string `json:"canonical_arguments,omitempty"`
	// MCPServers names the MCP upstream servers whose tools are not listed
	// yet (upstream_unavailable of GET /readyz only).
	MCPServers []string `json:"mcp_servers,omitempty"`
	// DecidedBy and DecidedAt say who decided an approval when
	// (approval_not_pending), so a console can show "already approved by
	// X at T".
	DecidedBy string `json:"decided_by,omitempty"`
	DecidedAt string `json:"decided_at,omitempty"`
	// ApprovalID and ApprovalExpiresAt (RFC 3339) name the call's approval
	// (approval_pending; approval_denied and approval_expired too).
	ApprovalID        string `json:"approval_id,omitempty"`
	ApprovalExpiresAt string `json:"approval_expires_at,omitempty"`
	// Reason says why a call was refused by its decide rules or its
	// approver, and By who decided (call_denied, approval_denied,
	// approval_expired).
	Reason string `json:"reason,omitempty"`
	// Budget, Remaining and ResetsAt (RFC 3339) name the budget a call
	// would overspend, what is left of it and when its window ends
	// (budget_exceeded).
	Budget    string   `json:"budget,omitempty"`
	Remaining *float64 `json:"remaining,omitempty"`
	ResetsAt  string   `json:"resets_at,omitempty"`
	By        string   `json:"by,omitempty"`
	// Caller is set on approval_pending when the caller's own human
	// decides (approver: caller), for an adapter that can ask them.
	Caller *CallerApproval `json:"-"`

	// RetryAfter, when > 0, is the Retry-After in whole seconds (REST sends
	// the header, MCP data.retry_after_ms).
	RetryAfter int `json:"-"`
	// allow is sent as the Allow header (405 only).
	allow string
}

// problemCode is everything fixed about one problem code, for both doors.
type problemCode struct {
	status    int
	title     string // fixed, so a title never carries user input
	retryable bool   // the code's default; WithRetryable overrides one answer
	label     string // the metrics outcome label of a request refused with it
}

// problemCodes is the one table of the contract's problem codes: a new
// error is one line here, and one in each door's own rendering of it
// (gateway/mcpserver's rpcCodes; TestMCPCodeColumn there keeps
// the two in step).
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
	wire.CodeChainDiverged:               {http.StatusConflict, "A receipt chain no longer holds what its latest checkpoint signed", false, labelInvalid},
	wire.CodePayloadTooLarge:             {http.StatusRequestEntityTooLarge, "Request body too large", false, labelInvalid},
	wire.CodeUnsupportedMediaType:        {http.StatusUnsupportedMediaType, "Content-Type must be application/json", false, labelInvalid},
	wire.CodeIdempotencyKeyMismatch:      {http.StatusUnprocessableEntity, "Idempotency-Key does not match the derived key", false, labelKeyMismatch},
	wire.CodeIdempotencyKeyReused:        {http.StatusUnprocessableEntity, "Idempotency-Key was used with other arguments", false, labelKeyReused},
	wire.CodeStepConflict:                {http.StatusUnprocessableEntity, "This agent step already made another call", false, labelStepConflict},
	wire.CodeEffectConflict:              {http.StatusConflict, "Another call already did this with other arguments", false, labelEffectConflict},
	wire.CodeBudgetExceeded:              {http.StatusForbidden, "A budget of this tool would go over its limit", false, labelBudgetExceeded},
	wire.CodeRateLimited:                 {http.StatusTooManyRequests, "Rate limit exceeded", true, labelRateLimited},
	wire.CodeToolFailed:                  {http.StatusInternalServerError, "The tool failed", true, labelToolError},
	wire.CodeUpstreamUnreachable:         {http.StatusBadGateway, "The tool's upstream is unreachable", true, labelToolError},
	wire.CodeUpstreamResponseTooLarge:    {http.StatusBadGateway, "The tool's upstream answered with too large a result", false, labelToolError},
	wire.CodeStoreUnavailable:            {http.StatusServiceUnavailable, "The idempotency store is unavailable", true, labelStoreError},
	wire.CodeUpstreamUnavailable:         {http.StatusServiceUnavailable, "The tool's upstream is not available yet", true, labelToolError},
	wire.CodeToolTimeout:                 {http.StatusGatewayTimeout, "The tool timed out", true, labelToolError},
	wire.CodeApprovalNotPending:          {http.StatusConflict, "The approval is not pending", false, labelInvalid},
	wire.CodeApprovalNotYours:            {http.StatusForbidden, "The approval is not this caller's to decide", false, labelInvalid},
	wire.CodeCallDenied:                  {http.StatusForbidden, "The tool's rules deny this call", false, labelDenied},
	wire.CodeApprovalPending:             {http.StatusConflict, "The call waits for a human's approval", true, labelApprovalPending},
	wire.CodeApprovalDenied:              {http.StatusForbidden, "The call's approval was denied", false, labelApprovalDenied},
	wire.CodeApprovalExpired:             {http.StatusForbidden, "The call's approval expired", false, labelApprovalExpired},
	wire.CodeNotAnApprover:               {http.StatusForbidden, "The decider is not an approver of this call", false, labelInvalid},
	wire.CodeSelfApproval:                {http.StatusForbidden, "The requester cannot decide their own call", false, labelInvalid},
	wire.CodeApprovalStale:               {http.StatusForbidden, "The tool's rules or definition changed since the approval", false, labelApprovalExpired},
	wire.CodeToolChanged:                 {http.StatusConflict, "The tool changed since it was pinned", false, labelToolChanged},
}

// unlistedCode is what an unlisted code gets: a programming error, which
// becomes a retryable 500 rather than a malformed answer.
var unlistedCode = problemCode{http.StatusInternalServerError, "Internal error", true, labelOther}

// Codes returns every code of the code table, for a door's own rendering
// of them to cover.
func Codes() []string {
	codes := make([]string, 0, len(problemCodes))
	for code := range problemCodes {
		codes = append(codes, code)
	}
	return codes
}

// codeOf returns the table row of code.
func codeOf(code string) problemCode {
	if pc, ok := problemCodes[code]; ok {
		return pc
	}
	return unlistedCode
}

// NewProblem builds the problem for one of the contract's codes (wire.Code*)
// with a detail for the reader; type, title, status and retryable come
// from the gateway's one code table (problemCodes), so a problem built
// outside this package (gatewaycmd's /readyz) reads exactly like the
// gateway's own.
func NewProblem(code, detail string) *Problem {
	pc := codeOf(code)
	return &Problem{
		Type:      wire.ProblemTypePrefix + code,
		Title:     pc.title,
		Status:    pc.status,
		Detail:    detail,
		Code:      code,
		Retryable: pc.retryable,
	}
}

// WithRetryable overrides the code's retryable for this one answer (an
// uncertain outcome of a lease_expiry: unknown tool answers tool_timeout
// with retryable false: a retry gets outcome_unknown). REST and MCP both
// send the overridden value.
func (p *Problem) WithRetryable(retryable bool) *Problem {
	p.Retryable = retryable
	return p
}

// WithRetryAfter sets the Retry-After seconds (at least 1): REST sends the
// header, MCP data.retry_after_ms.
func (p *Problem) WithRetryAfter(seconds int) *Problem {
	p.RetryAfter = max(seconds, 1)
	return p
}

// label is the metrics outcome label of a request refused with p.
func (p *Problem) label() string {
	return codeOf(p.Code).label
}

// WriteProblem sends p as application/problem+json with its status (and
// Retry-After and Allow when set).
func WriteProblem(w http.ResponseWriter, p *Problem) {
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
