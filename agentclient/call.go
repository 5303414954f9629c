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
	"github.com/toolgateway/toolgateway/wire"
)

// Call runs tool with args as step step of the session. args may be
// json.RawMessage or []byte (taken as JSON text) or any value json.Marshal
// accepts; it must encode to a JSON object. The canonical (RFC 8785) bytes
// are sent, with the key derived from them.
//
// Call retries as the package documentation describes. It returns a *Result
// for the tool's outcome, an [*ApprovalPendingError] at once when the call
// waits for a human's approval, an *Error for any other problem or 5xx response, a
// keyderive error for invalid inputs or an ErrInvalidBaseURL/ErrInvalidToken
// error for a misconfigured client (both at once, no request sent), or the
// network error of the last attempt. When ctx ends during retries the error
// wraps both ctx.Err() and the last attempt's error; when the retry budget
// runs out it wraps the last attempt's error.
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
	if c.err != nil {
		return nil, c.err
	}
	start := c.now()
	end := c.retryEnd(ctx, start)
	// previous is the outcome of the last completed attempt, reported along
	// with ctx's error if ctx ends in the middle of the next one.
	var previous error
	for attempt := 1; ; attempt++ {
		req, err := c.newRequest(ctx, call, c.preferSeconds(ctx, end))
		if err != nil {
			// Nothing about this request changes on a retry.
			return nil, err
		}
		result, problem, err := c.send(req, call)
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
			return nil, asApprovalPending(problem)
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
		if !end.IsZero() && c.now().Add(wait).After(end) {
			return nil, fmt.Errorf("agentclient: gave up after %d attempts in %v (retry budget %v): %w",
				attempt, c.now().Sub(start).Round(time.Millisecond), end.Sub(start), lastErr)
		}
		if err := c.sleep(ctx, wait); err != nil {
			return nil, fmt.Errorf("agentclient: %w: %w", err, lastErr)
		}
	}
}

// retryEnd is the time after which a call starts no attempt or wait; zero
// when only the context (and WithMaxAttempts) bound the retries.
func (c *Client) retryEnd(ctx context.Context, start time.Time) time.Time {
	if !c.retryBudgetSet {
		if _, hasDeadline := ctx.Deadline(); hasDeadline {
			return time.Time{}
		}
	}
	if c.retryBudget <= 0 {
		return time.Time{}
	}
	return start.Add(c.retryBudget)
}

// preferSeconds is the N of the Prefer: wait=N header of the next attempt:
// the configured wait rounded up to whole seconds, but never past the
// context's deadline or the retry budget's end, so the gateway answers while
// the client still listens; 0 means send no Prefer header.
func (c *Client) preferSeconds(ctx context.Context, end time.Time) int64 {
	if c.preferWait <= 0 {
		return 0
	}
	seconds := int64((c.preferWait + time.Second - 1) / time.Second)
	if deadline, ok := ctx.Deadline(); ok {
		seconds = min(seconds, int64(time.Until(deadline)/time.Second))
	}
	if !end.IsZero() {
		seconds = min(seconds, int64(end.Sub(c.now())/time.Second))
	}
	return max(seconds, 0)
}

// newRequest builds one attempt's request. An error here is permanent: the
// next attempt would build the same request.
func (c *Client) newRequest(ctx context.Context, call *attemptRequest, preferSeconds int64) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, call.url, bytes.NewReader(call.body))
	if err != nil {
		return nil, fmt.Errorf("agentclient: build request: %w", err)
	}
	req.Header.Set("Content-Type", wire.MediaTypeJSON)
	req.Header.Set("Accept", wire.MediaTypeJSON+", "+wire.MediaTypeProblem)
	req.Header.Set(wire.HeaderIdempotencyKey, call.key)
	req.Header.Set(wire.HeaderSessionID, call.sessionID)
	req.Header.Set(wire.HeaderStepIndex, strconv.FormatUint(call.step, 10))
	if c.token != "" {
		req.Header.Set(wire.HeaderAuthorization, "Bearer "+c.token)
	}
	if preferSeconds > 0 {
		req.Header.Set(wire.HeaderPrefer, "wait="+strconv.FormatInt(preferSeconds, 10))
	}
	return req, nil
}

// send makes one attempt. It returns a Result for the tool's outcome, a
// problem for an error response, or err for a transport failure (including a
// body cut short, which is as retryable as a lost connection).
func (c *Client) send(req *http.Request, call *attemptRequest) (*Result, *Error, error) {
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
		Replayed:    resp.Header.Get(wire.HeaderReplayed) == "true",
		ExecutionID: resp.Header.Get(wire.HeaderExecutionID),
		Key:         call.key,
		ContentType: contentType,
		RequestID:   resp.Header.Get(wire.HeaderRequestID),
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
