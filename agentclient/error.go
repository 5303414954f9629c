package agentclient

import (
	"cmp"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/toolgateway/toolgateway/wire"
)

// Error is a problem response (RFC 9457 application/problem+json) or a 5xx
// response. Use errors.As to get it from the error Call returns, and compare
// Code with the wire.Code* constants.
type Error struct {
	// Status is the HTTP status.
	Status int `json:"-"`
	// Type, Code, Title and Detail are the problem's members; Code is the
	// machine-readable code such as wire.CodeStepConflict (empty when the
	// body was not a problem document).
	Type   string `json:"type"`
	Code   string `json:"code"`
	Title  string `json:"title"`
	Detail string `json:"detail"`
	// Retryable tells whether the same request, unchanged, may succeed later.
	Retryable bool `json:"retryable"`
	// Errors lists the schema violations of invalid_arguments.
	Errors []wire.Violation `json:"errors,omitempty"`
	// Tool and ExecutionID name the earlier call that holds the step, for
	// step_conflict.
	Tool        string `json:"tool,omitempty"`
	ExecutionID string `json:"execution_id,omitempty"`
	// ExpectedKey and CanonicalArguments come with idempotency_key_mismatch:
	// the key the gateway derived from the headers and body, and the RFC 8785
	// text of the arguments it derived it from. Comparing CanonicalArguments
	// with what the client hashed shows the byte that differs (a 1.0 that
	// should be 1, an escaped \u00e9 that should be é).
	ExpectedKey        string `json:"expected_key,omitempty"`
	CanonicalArguments string `json:"canonical_arguments,omitempty"`
	// ApprovalID and ApprovalExpiresAt (RFC 3339) name the call's approval
	// (approval_pending, approval_denied, approval_expired); Call returns
	// approval_pending as an [*ApprovalPendingError] wrapping this Error.
	ApprovalID        string `json:"approval_id,omitempty"`
	ApprovalExpiresAt string `json:"approval_expires_at,omitempty"`
	// Reason says why the call was refused (call_denied: the rule's reason;
	// approval_denied: the approver's note) and By who decided it.
	Reason string `json:"reason,omitempty"`
	By     string `json:"by,omitempty"`
	// RetryAfter is the response's Retry-After (0 when absent).
	RetryAfter time.Duration `json:"-"`
	// RequestID is the gateway's X-Request-Id.
	RequestID string `json:"-"`
	// Raw is the response body exactly as received.
	Raw []byte `json:"-"`
}

// Error implements error: "agentclient: <status> <code>: <what happened>",
// where what happened is the problem's detail (its title when there is no
// detail), followed by what the code's extra members say. The message
// never holds a whole key: it may be logged.
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "agentclient: %d", e.Status)
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	}
	// The title names the code's general case and the detail this case, so
	// one of them says it all; both would say it twice.
	if what := cmp.Or(e.Detail, e.Title); what != "" {
		b.WriteString(": " + what)
	}
	switch {
	case e.Tool != "" || e.ExecutionID != "":
		fmt.Fprintf(&b, " (earlier call: tool %s, execution %s)", cmp.Or(e.Tool, "?"), cmp.Or(e.ExecutionID, "?"))
	case len(e.Errors) > 0:
		violations := make([]string, len(e.Errors))
		for i, v := range e.Errors {
			violations[i] = cmp.Or(v.Location, "/") + ": " + v.Message
		}
		b.WriteString(" (" + strings.Join(violations, "; ") + ")")
	case e.ExpectedKey != "":
		fmt.Fprintf(&b, " (expected key %.8s…)", e.ExpectedKey)
	case e.ApprovalID != "":
		fmt.Fprintf(&b, " (approval %s", e.ApprovalID)
		if e.By != "" {
			fmt.Fprintf(&b, ", decided by %s", e.By)
		}
		b.WriteString(")")
	}
	return b.String()
}

// isProblem reports whether a Content-Type is application/problem+json.
func isProblem(contentType string) bool {
	mediaType, _, err := mime.ParseMediaType(contentType)
	return err == nil && mediaType == wire.MediaTypeProblem
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
	problem.RetryAfter = parseRetryAfter(resp.Header.Get(wire.HeaderRetryAfter))
	problem.RequestID = resp.Header.Get(wire.HeaderRequestID)
	problem.Raw = body
	return problem
}
