package agentclient

import (
	"context"
	"net/http"
	"strings"
	"time"
)

// Default retry policy.
const (
	defaultInitialBackoff = 100 * time.Millisecond
	defaultMaxBackoff     = 5 * time.Second
	// maxPreferWait is the longest wait the gateway honours (contract §1).
	maxPreferWait = 60 * time.Second
)

// Client calls tools on one gateway. It is safe for concurrent use.
type Client struct {
	baseURL        string
	httpClient     *http.Client
	token          string
	initialBackoff time.Duration
	maxBackoff     time.Duration
	maxAttempts    int // 0: until ctx ends
	preferWait     time.Duration
	// sleep waits between attempts; replaced in tests to record the delays.
	sleep func(ctx context.Context, d time.Duration) error
}

// Option configures a Client.
type Option func(*Client)

// New returns a client for the gateway whose root URL is baseURL (for example
// "https://gateway.internal"); calls go to <baseURL>/api/tools/v1/<tool>.
func New(baseURL string, opts ...Option) *Client {
	c := &Client{
		baseURL:        strings.TrimRight(baseURL, "/"),
		httpClient:     http.DefaultClient,
		initialBackoff: defaultInitialBackoff,
		maxBackoff:     defaultMaxBackoff,
		sleep:          sleepContext,
	}
	for _, opt := range opts {
		opt(c)
	}
	return c
}

// WithToken sends "Authorization: Bearer <token>" on every call.
func WithToken(token string) Option {
	return func(c *Client) { c.token = token }
}

// WithHTTPClient uses c for every request instead of http.DefaultClient. Its
// Timeout, if any, bounds each attempt, not the whole Call.
func WithHTTPClient(httpClient *http.Client) Option {
	return func(c *Client) { c.httpClient = httpClient }
}

// WithRetry sets the backoff: the first retry waits about initial, each
// further one doubles it up to max; each delay is drawn at random from its
// upper half so that many agents retrying at once spread out. Values ≤ 0
// keep the defaults (100 ms, 5 s).
func WithRetry(initial, max time.Duration) Option {
	return func(c *Client) {
		if initial > 0 {
			c.initialBackoff = initial
		}
		if max > 0 {
			c.maxBackoff = max
		}
		if c.maxBackoff < c.initialBackoff {
			c.maxBackoff = c.initialBackoff
		}
	}
}

// WithMaxAttempts bounds the number of HTTP attempts per Call (the first
// one included). 0, the default, retries until ctx ends.
func WithMaxAttempts(n int) Option {
	return func(c *Client) {
		if n >= 0 {
			c.maxAttempts = n
		}
	}
}

// WithPreferWait sends "Prefer: wait=N" (N = d in whole seconds, rounded up,
// at most 60): when the same call is still running elsewhere, the gateway
// waits up to N seconds for its outcome instead of answering 409 at once.
// Make sure the HTTP client's timeout is longer than d.
func WithPreferWait(d time.Duration) Option {
	return func(c *Client) { c.preferWait = min(max(d, 0), maxPreferWait) }
}

// Session returns a handle for the agent run identified by id. The id is
// checked when a call is made (1–256 visible ASCII characters, no ':').
func (c *Client) Session(id string) *Session {
	return &Session{client: c, id: id}
}

// Session is one agent run: the scope of its step indices.
type Session struct {
	client *Client
	id     string
}

// ID returns the session id.
func (s *Session) ID() string { return s.id }

func sleepContext(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}
