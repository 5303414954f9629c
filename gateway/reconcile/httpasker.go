package reconcile

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// Asker asks a tool's owner what happened to one call.
type Asker interface {
	// Ask returns the owner's answer. An error wrapping errInvalidAnswer
	// is an answer that could not be used; any other error, no answer.
	Ask(ctx context.Context, q Question, maxBodyBytes int64) (Answer, error)
}

// HTTPAsker POSTs the question to an HTTP endpoint (reconcile.http.url).
type HTTPAsker struct {
	url    *url.URL
	client *http.Client
}

// NewHTTPAsker checks rawURL (an absolute http or https URL) and returns
// its asker; client should not follow redirects (httptool.NewClient).
func NewHTTPAsker(rawURL string, client *http.Client) (*HTTPAsker, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("must be an absolute http or https URL")
	}
	return &HTTPAsker{url: u, client: client}, nil
}

// Ask POSTs q once (the request is never written twice: asking is
// harmless, but an answer must come from one question) and reads at most
// a little more than maxBodyBytes of the answer.
func (a *HTTPAsker) Ask(ctx context.Context, q Question, maxBodyBytes int64) (Answer, error) {
	payload, err := json.Marshal(q)
	if err != nil {
		return Answer{}, fmt.Errorf("encode question: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url.String(), bytes.NewReader(payload))
	if err != nil {
		return Answer{}, fmt.Errorf("build request: %w", err)
	}
	req.GetBody = nil // as httptool's sendOnce: net/http cannot resend it
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.client.Do(req)
	if err != nil {
		return Answer{}, fmt.Errorf("no answer from %s: %w", a.url.Redacted(), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return Answer{}, fmt.Errorf("answer status %d from %s", resp.StatusCode, a.url.Redacted())
	}
	// The answer wraps the body: allow room for the envelope, then let
	// parseAnswer hold the body itself to maxBodyBytes.
	limit := maxBodyBytes + envelopeBytes
	raw, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return Answer{}, fmt.Errorf("read answer from %s: %w", a.url.Redacted(), err)
	}
	if int64(len(raw)) > limit {
		return Answer{}, fmt.Errorf("%w: answer exceeds %d bytes", errInvalidAnswer, limit)
	}
	return parseAnswer(raw, maxBodyBytes)
}

// envelopeBytes is the room an answer may take beyond its body.
const envelopeBytes = 4 << 10
