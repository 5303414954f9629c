package agentclient

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"time"
)

// Problem codes of the contract that change what a client does.
const (
	CodeRequestInProgress = "request_in_progress"
	CodeOutcomeUnknown    = "outcome_unknown"
	CodeStepConflict      = "step_conflict"
	CodeKeyReused         = "idempotency_key_reused"
	CodeKeyMismatch       = "idempotency_key_mismatch"
	CodeInvalidArguments  = "invalid_arguments"
	CodeInvalidJSON       = "invalid_json"
)

// Error is a problem response (RFC 9457 application/problem+json) or a 5xx
// response. Use errors.As to get it from the error Call returns.
type Error struct {
	// Status is the HTTP status.
	Status int `json:"-"`
	// Type, Code, Title and Detail are the problem's members; Code is the
	// contract's machine-readable code such as "step_conflict" (empty when
	// the body was not a problem document).
	Type   string `json:"type"`
	Code   string `json:"code"`
	Title  string `json:"title"`
	Detail string `json:"detail"`
	// Retryable tells whether the same request, unchanged, may succeed later.
	Retryable bool `json:"retryable"`
	// Errors lists the schema violations of invalid_arguments.
	Errors []FieldError `json:"errors,omitempty"`
	// Tool and ExecutionID name the earlier call that holds the step, for
	// step_conflict.
	Tool        string `json:"tool,omitempty"`
	ExecutionID string `json:"execution_id,omitempty"`
	// RetryAfter is the response's Retry-After (0 when absent).
	RetryAfter time.Duration `json:"-"`
	// RequestID is the gateway's X-Request-Id.
	RequestID string `json:"-"`
	// Raw is the response body exactly as received.
	Raw []byte `json:"-"`
}

// FieldError is one schema violation: Location is a JSON Pointer into the
// arguments ("" for the root).
type FieldError struct {
	Location string `json:"location"`
	Message  string `json:"message"`
}

// Error implements error.
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "agentclient: %d", e.Status)
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	}
	if e.Title != "" {
		b.WriteString(": " + e.Title)
	}
	if e.Detail != "" {
		b.WriteString(": " + e.Detail)
	}
	return b.String()
}

// isProblem reports whether a Content-Type is application/problem+json.
func isProblem(contentType string) bool {
	mediaType, _, err := mime.ParseMediaType(contentType)
	return err == nil && mediaType == "application/problem+json"
}

// newError builds the *Error of a response. A body that is not a problem
// document still yields an Error with Status, Raw and Title set.
func newError(resp *http.Response, body []byte) *Error {
	problem := &Error{}
	if isProblem(resp.Header.Get("Content-Type")) {
		// A malformed problem body leaves the fields empty; Raw keeps it.
		_ = json.Unmarshal(body, problem)
	} else {
		problem.Retryable = retryableStatus(resp.StatusCode)
	}
	problem.Status = resp.StatusCode
	if problem.Title == "" {
		problem.Title = http.StatusText(resp.StatusCode)
	}
	problem.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"))
	problem.RequestID = resp.Header.Get("X-Request-Id")
	problem.Raw = body
	return problem
}
