package agentclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/toolgateway/toolgateway/keyderive"
)

// Call runs tool with args as step step of the session. args may be
// json.RawMessage or []byte (taken as JSON text) or any value json.Marshal
// accepts; it must encode to a JSON object. The canonical (RFC 8785) bytes
// are sent, with the key derived from them.
//
// Call retries as the package documentation describes. It returns a *Result
// for the tool's outcome, an *Error for a problem or 5xx response, a
// keyderive error (no request sent) for invalid inputs, or the network error
// of the last attempt. When ctx ends during retries the error wraps both
// ctx.Err() and the last attempt's error.
func (s *Session) Call(ctx context.Context, step uint64, tool string, args any) (*Result, error) {
	text, err := argumentsJSON(args)
	if err != nil {
		return nil, err
	}
	key, canonical, err := keyderive.Derive(s.id, step, tool, text)
	if err != nil {
		return nil, fmt.Errorf("agentclient: %s step %d: %w", tool, step, err)
	}
	call := &attemptRequest{
		url:       s.client.baseURL + "/api/tools/v1/" + tool,
		body:      canonical,
		key:       key,
		sessionID: s.id,
		step:      step,
	}
	return s.client.callWithRetries(ctx, call)
}

// attemptRequest holds what is identical in every attempt of one call.
type attemptRequest struct {
	url       string
	body      []byte
	key       string
	sessionID string
	step      uint64
}

func (c *Client) callWithRetries(ctx context.Context, call *attemptRequest) (*Result, error) {
	// previous is the outcome of the last completed attempt, reported along
	// with ctx's error if ctx ends in the middle of the next one.
	var previous error
	for attempt := 1; ; attempt++ {
		result, problem, err := c.attempt(ctx, call)
		if err == nil && problem == nil {
			result.Attempts = attempt
			return result, nil
		}
		var lastErr error = problem
		var wait time.Duration
		switch {
		case err != nil:
			if ctx.Err() != nil {
				if previous != nil {
					return nil, fmt.Errorf("agentclient: %w (previous attempt: %w)", err, previous)
				}
				return nil, fmt.Errorf("agentclient: %w", err)
			}
			lastErr = fmt.Errorf("agentclient: %w", err)
			wait = c.backoff(attempt - 1)
		case !shouldRetry(problem):
			return nil, problem
		case problem.RetryAfter > 0:
			wait = problem.RetryAfter
		default:
			wait = c.backoff(attempt - 1)
		}
		previous = lastErr
		if c.maxAttempts > 0 && attempt >= c.maxAttempts {
			return nil, lastErr
		}
		// A wait that outlasts the deadline cannot end in success: give up now.
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
			return nil, fmt.Errorf("agentclient: %w before the next attempt (in %v): %w", context.DeadlineExceeded, wait, lastErr)
		}
		if err := c.sleep(ctx, wait); err != nil {
			return nil, fmt.Errorf("agentclient: %w: %w", err, lastErr)
		}
	}
}

// attempt sends one request. It returns a Result for the tool's outcome, a
// problem for an error response, or err for a transport failure (including a
// body cut short, which is as retryable as a lost connection).
func (c *Client) attempt(ctx context.Context, call *attemptRequest) (*Result, *Error, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, call.url, bytes.NewReader(call.body))
	if err != nil {
		return nil, nil, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, application/problem+json")
	req.Header.Set("Idempotency-Key", call.key)
	req.Header.Set("Agent-Session-Id", call.sessionID)
	req.Header.Set("Agent-Step-Index", strconv.FormatUint(call.step, 10))
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.preferWait > 0 {
		seconds := (c.preferWait + time.Second - 1) / time.Second
		req.Header.Set("Prefer", "wait="+strconv.FormatInt(int64(seconds), 10))
	}
	resp, err := c.httpClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, fmt.Errorf("read response of %s: %w", call.url, err)
	}
	contentType := resp.Header.Get("Content-Type")
	if resp.StatusCode >= 500 || (resp.StatusCode >= 400 && isProblem(contentType)) {
		return nil, newError(resp, body), nil
	}
	return &Result{
		Status:      resp.StatusCode,
		Body:        body,
		Replayed:    resp.Header.Get("Idempotent-Replayed") == "true",
		ExecutionID: resp.Header.Get("Tool-Execution-Id"),
		Key:         call.key,
		ContentType: contentType,
		RequestID:   resp.Header.Get("X-Request-Id"),
	}, nil, nil
}

// argumentsJSON turns Call's args into JSON text.
func argumentsJSON(args any) ([]byte, error) {
	switch v := args.(type) {
	case json.RawMessage:
		return v, nil
	case []byte:
		return v, nil
	case nil:
		return nil, fmt.Errorf("agentclient: nil arguments: %w", keyderive.ErrNotObject)
	}
	text, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("agentclient: encode arguments: %w", err)
	}
	return text, nil
}
