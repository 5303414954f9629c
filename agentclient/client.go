package agentclient

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Defaults of a Client.
const (
	// DefaultRetryBudget bounds how long Call keeps retrying when its
	// context has no deadline: no attempt starts, and no wait begins, that
	// would end later than this after the call started. Against a gateway
	// that is down a Call therefore ends within this budget plus one
	// connection attempt (DefaultDialTimeout). WithRetryBudget changes it.
	DefaultRetryBudget = 20 * time.Second
	// DefaultPreferWait is the "Prefer: wait=N" a Call sends unless
	// WithPreferWait says otherwise: a duplicate of a call still running
	// elsewhere is held by the gateway until the outcome exists (at most
	// this long) instead of being told to come back after Retry-After.
	DefaultPreferWait = 10 * time.Second
	// DefaultDialTimeout bounds the TCP connection set-up of the default
	// HTTP client, so an unreachable gateway fails fast.
	DefaultDialTimeout = 10 * time.Second

	defaultInitialBackoff = 100 * time.Millisecond
	defaultMaxBackoff     = 5 * time.Second
	// maxPreferWait is the longest wait the gateway honours.
	maxPreferWait = 60 * time.Second
)

// ErrInvalidBaseURL is returned (wrapped) by every Call of a Client whose
// base URL is not an absolute http:// or https:// URL, and ErrInvalidToken
// by one whose token cannot be sent in a header. Neither is retried: no
// request is sent.
var (
	ErrInvalidBaseURL = errors.New("agentclient: invalid base URL")
	ErrInvalidToken   = errors.New("agentclient: invalid token")
)

// Client calls tools on one gateway. It is safe for concurrent use.
type Client struct {
	baseURL        string
	httpClient     *http.Client
	token          string
	initialBackoff time.Duration
	maxBackoff     time.Duration
	maxAttempts    int // 0: no bound on attempts
	preferWait     time.Duration
	// retryBudget is the bound on the time Call retries; retryBudgetSet
	// says WithRetryBudget chose it (then it applies whatever the context),
	// otherwise DefaultRetryBudget applies to contexts without a deadline.
	retryBudget    time.Duration
	retryBudgetSet bool
	// err is why the client cannot send anything (a malformed base URL or
	// token); every Call returns it at once.
	err error
	// sleep waits between attempts and now reads the clock; tests replace
	// both to record the delays without waiting them.
	sleep func(ctx context.Context, d time.Duration) error
	now   func() time.Time
}

// Option configures a Client.
type Option func(*Client)

// New returns a client for the gateway whose root URL is baseURL, an
// absolute http:// or https:// URL such as "https://gateway.internal" or
// "http://127.0.0.1:8080"; calls go to <baseURL>/api/tools/v1/<tool>. A
// baseURL without a scheme ("127.0.0.1:8080") or host is a mistake that no
// retry can fix: New keeps it, and every Call returns it at once, wrapping
// ErrInvalidBaseURL, without sending anything.
func New(baseURL string, opts ...Option) *Client {
	c := &Client{
		baseURL:        strings.TrimRight(baseURL, "/"),
		httpClient:     defaultHTTPClient(),
		initialBackoff: defaultInitialBackoff,
		maxBackoff:     defaultMaxBackoff,
		preferWait:     DefaultPreferWait,
		retryBudget:    DefaultRetryBudget,
		sleep:          sleepContext,
		now:            time.Now,
	}
	for _, opt := range opts {
		opt(c)
	}
	c.err = errors.Join(checkBaseURL(baseURL), checkToken(c.token))
	return c
}

// defaultHTTPClient is http.DefaultTransport's behaviour (proxies from the
// environment, HTTP/2, keep-alives) with a bounded connection set-up.
func defaultHTTPClient() *http.Client {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.DialContext = (&net.Dialer{Timeout: DefaultDialTimeout, KeepAlive: 30 * time.Second}).DialContext
	return &http.Client{Transport: transport}
}

// checkBaseURL accepts absolute http and https URLs with a host.
func checkBaseURL(baseURL string) error {
	scheme, _, _ := strings.Cut(baseURL, "://")
	if scheme = strings.ToLower(scheme); scheme != "http" && scheme != "https" {
		return fmt.Errorf("%w %q: it must start with http:// or https:// (for example \"http://127.0.0.1:8080\")", ErrInvalidBaseURL, baseURL)
	}
	u, err := url.Parse(baseURL)
	switch {
	case err != nil:
		return fmt.Errorf("%w %q: %w", ErrInvalidBaseURL, baseURL, err)
	case u.Host == "":
		return fmt.Errorf("%w %q: no host", ErrInvalidBaseURL, baseURL)
	case u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("%w %q: a query or fragment cannot precede the tool path", ErrInvalidBaseURL, baseURL)
	}
	return nil
}

// checkToken accepts tokens a header can carry: visible ASCII only. The
// token itself never appears in the error.
func checkToken(token string) error {
	for i := 0; i < len(token); i++ {
		if token[i] < 0x21 || token[i] > 0x7e {
			return fmt.Errorf("%w: byte %d is not visible ASCII", ErrInvalidToken, i)
		}
	}
	return nil
}

// WithToken sends "Authorization: Bearer <token>" on every call.
func WithToken(token string) Option {
	return func(c *Client) { c.token = token }
}

// WithHTTPClient uses c for every request instead of the default client
// (http.DefaultTransport's settings with a DefaultDialTimeout connection
// set-up). Its Timeout, if any, bounds each attempt, not the whole Call;
// make it longer than the Prefer: wait the client sends.
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
// one included). 0, the default, sets no bound on attempts: the context and
// the retry budget end the retries.
func WithMaxAttempts(n int) Option {
	return func(c *Client) {
		if n >= 0 {
			c.maxAttempts = n
		}
	}
}

// WithRetryBudget bounds the time a Call keeps retrying, measured from its
// start, whatever its context: no attempt or wait starts that would end
// later (an attempt already running is not cut short; the context and the
// HTTP client's Timeout bound it). d ≤ 0 removes the bound, so only the
// context and WithMaxAttempts end the retries. Without this option,
// DefaultRetryBudget applies to calls whose context has no deadline, and a
// context with a deadline is the only time bound.
func WithRetryBudget(d time.Duration) Option {
	return func(c *Client) {
		c.retryBudget = max(d, 0)
		c.retryBudgetSet = true
	}
}

// WithPreferWait sets the "Prefer: wait=N" every attempt sends (N = d in
// whole seconds, rounded up, at most 60; DefaultPreferWait without this
// option): when the same call is still running elsewhere, the gateway holds
// the request up to N seconds and answers with the outcome as soon as it
// exists, instead of answering 409 at once. N is also kept within the
// context's deadline and the retry budget. d ≤ 0 sends no Prefer header.
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
