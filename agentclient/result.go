package agentclient

import (
	"encoding/json"
	"fmt"
)

// Result is the tool's outcome, from its execution or from a replay.
type Result struct {
	// Status is the HTTP status the tool answered (2xx–4xx).
	Status int
	// Body is the tool's response body, byte for byte.
	Body json.RawMessage
	// Replayed is true when the gateway answered from its record of an
	// earlier execution (Idempotent-Replayed: true) and the tool did not run.
	Replayed bool
	// ExecutionID identifies the execution (Tool-Execution-Id); a replay
	// carries the id of the execution it replays.
	ExecutionID string
	// Key is the Idempotency-Key that was sent.
	Key string
	// ContentType is the response's Content-Type.
	ContentType string
	// RequestID is the gateway's X-Request-Id of the last attempt.
	RequestID string
	// Attempts is how many HTTP requests the call took (1 without retries).
	Attempts int
}

// Decode unmarshals the body into v.
func (r *Result) Decode(v any) error {
	if err := json.Unmarshal(r.Body, v); err != nil {
		return fmt.Errorf("agentclient: decode result of execution %s: %w", r.ExecutionID, err)
	}
	return nil
}
