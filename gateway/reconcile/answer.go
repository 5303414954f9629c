package reconcile

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Outcomes of one attempt, the outcome label of gateway_reconcile_total
// and ReconcileAttempt.Outcome. The first three are the owner's answers.
const (
	// OutcomeCommitted: the upstream says the call acted; the record
	// completes with the status and body it gave.
	OutcomeCommitted = "committed"
	// OutcomeNotCommitted: the upstream says the call did not act and
	// never will; the record is removed so the next call runs.
	OutcomeNotCommitted = "not_committed"
	// OutcomeUnknown: the upstream cannot tell yet; asked again later.
	OutcomeUnknown = "unknown"
	// OutcomeInvalid: an answer that is not JSON, names an unknown
	// outcome, or carries a body that is invalid or too large.
	OutcomeInvalid = "invalid"
	// OutcomeError: no answer (transport error, a non-2xx status, the
	// timeout).
	OutcomeError = "error"
)

// Question is what the gateway asks a tool's owner about one record (the
// JSON POSTed to reconcile.http.url, or the arguments of reconcile.tool).
type Question struct {
	Tool         string `json:"tool"`
	UpstreamKey  string `json:"upstream_key"`
	FencingToken int64  `json:"fencing_token"`
	ExecutionID  string `json:"execution_id"`
	// Arguments are the call's canonical arguments (null when the record
	// kept none).
	Arguments json.RawMessage `json:"arguments"`
}

// Answer is a valid answer of a tool's owner.
type Answer struct {
	// Outcome is OutcomeCommitted, OutcomeNotCommitted or OutcomeUnknown.
	Outcome string
	// Status and Body are the committed outcome (Body: JSON text).
	Status int
	Body   []byte
}

// errInvalidAnswer is wrapped by what parseAnswer refuses.
var errInvalidAnswer = errors.New("invalid reconcile answer")

// parseAnswer reads an owner's answer: a JSON object with "outcome"; a
// committed one carries a "status" 200–499 (the statuses the gateway
// records) and a "body" of at most maxBodyBytes.
func parseAnswer(raw []byte, maxBodyBytes int64) (Answer, error) {
	var wire struct {
		Outcome string          `json:"outcome"`
		Status  int             `json:"status"`
		Body    json.RawMessage `json:"body"`
	}
	if err := json.Unmarshal(raw, &wire); err != nil {
		return Answer{}, fmt.Errorf("%w: not a JSON object", errInvalidAnswer)
	}
	switch wire.Outcome {
	case OutcomeNotCommitted, OutcomeUnknown:
		return Answer{Outcome: wire.Outcome}, nil
	case OutcomeCommitted:
	default:
		return Answer{}, fmt.Errorf("%w: unknown outcome %.40q", errInvalidAnswer, wire.Outcome)
	}
	if wire.Status < 200 || wire.Status > 499 {
		return Answer{}, fmt.Errorf("%w: committed status %d: want 200–499", errInvalidAnswer, wire.Status)
	}
	body := []byte(wire.Body)
	if len(body) == 0 {
		body = []byte("null")
	}
	if int64(len(body)) > maxBodyBytes {
		return Answer{}, fmt.Errorf("%w: body of %d bytes exceeds max_response_bytes %d", errInvalidAnswer, len(body), maxBodyBytes)
	}
	return Answer{Outcome: OutcomeCommitted, Status: wire.Status, Body: body}, nil
}
