// Package httptool is the tool kind that forwards each call to an HTTP
// upstream: POST url with the client's exact argument bytes and the call's
// idempotency headers, the upstream's status, body and Content-Type being
// the outcome.
package httptool

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"sync/atomic"

	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/tools/traceprop"
	"github.com/toolgateway/toolgateway/wire"
)

// DefaultMaxResponseBytes caps an upstream response when Config leaves it 0.
const DefaultMaxResponseBytes int64 = 4 << 20

// Config declares one upstream tool.
type Config struct {
	// Name, Description, InputSchema and ReadOnly become the tool's Spec.
	Name        string
	Description string
	InputSchema json.RawMessage
	ReadOnly    bool
	// URL receives POST requests; http or https.
	URL string
	// Headers are sent with every call (an API key for the upstream, say).
	// They cannot replace the headers the gateway forwards: Content-Type,
	// Idempotency-Key, Agent-Session-Id, Agent-Step-Index, Fencing-Token,
	// Tool-Execution-Id, Tool-Tenant. A "Host" entry sets the request's Host.
	Headers map[string]string
	// MaxResponseBytes caps the response body (default
	// DefaultMaxResponseBytes); a larger one is an error wrapping
	// tools.ErrResponseTooLarge.
	MaxResponseBytes int64
	// Client sends the calls; nil means a client of its own from NewClient.
	// Pass one shared client to every tool so they share keep-alive pools.
	Client *http.Client
	// PinSHA256, when set, pins the upstream's TLS certificate (https
	// only): the SHA-256 of its SubjectPublicKeyInfo must be one of these
	// (ParsePin), or the connection is refused in the handshake, before a
	// request byte is written (an error wrapping
	// tools.ErrUpstreamUnreachable whose message names ErrPinMismatch and
	// the key the server presented). The tool then has a connection pool
	// of its own, cloned from Client's transport.
	PinSHA256 [][]byte
}

// Tool is an HTTP upstream tool. It is safe for concurrent use.
type Tool struct {
	spec     tools.Spec
	url      *url.URL
	headers  http.Header
	host     string
	maxBytes int64
	client   *http.Client
}

var _ tools.Tool = (*Tool)(nil)

// New checks cfg and returns its tool. Errors name the tool. The input
// schema is compiled when the tool is added to a tools.Registry.
func New(cfg Config) (*Tool, error) {
	if !tools.ValidName(cfg.Name) {
		return nil, fmt.Errorf("tool %q: invalid name: must match %s", cfg.Name, tools.NamePattern)
	}
	target, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("tool %q: http.url: %w", cfg.Name, err)
	}
	if (target.Scheme != "http" && target.Scheme != "https") || target.Host == "" {
		return nil, fmt.Errorf("tool %q: http.url %q: must be an absolute http or https URL", cfg.Name, target.Redacted())
	}
	headers, host, err := staticHeaders(cfg.Headers)
	if err != nil {
		return nil, fmt.Errorf("tool %q: http.headers: %w", cfg.Name, err)
	}
	maxBytes := cfg.MaxResponseBytes
	if maxBytes < 0 {
		return nil, fmt.Errorf("tool %q: max response bytes %d is negative", cfg.Name, maxBytes)
	}
	if maxBytes == 0 {
		maxBytes = DefaultMaxResponseBytes
	}
	client := cfg.Client
	if client == nil {
		client = NewClient()
	}
	if len(cfg.PinSHA256) > 0 {
		if target.Scheme != "https" {
			return nil, fmt.Errorf("tool %q: tls.pin_sha256: the url must be https", cfg.Name)
		}
		for _, p := range cfg.PinSHA256 {
			if len(p) != sha256.Size {
				return nil, fmt.Errorf("tool %q: tls.pin_sha256: a pin is %d bytes, want 32", cfg.Name, len(p))
			}
		}
		if client, err = pinnedClient(client, cfg.PinSHA256); err != nil {
			return nil, fmt.Errorf("tool %q: %w", cfg.Name, err)
		}
	}
	return &Tool{
		spec: tools.Spec{
			Name:        cfg.Name,
			Description: cfg.Description,
			InputSchema: cfg.InputSchema,
			ReadOnly:    cfg.ReadOnly,
			Target:      target.Redacted(),
		},
		url:      target,
		headers:  headers,
		host:     host,
		maxBytes: maxBytes,
		client:   client,
	}, nil
}

// Spec describes the tool as configured.
func (t *Tool) Spec() tools.Spec {
	return t.spec
}

// Call POSTs the arguments to the upstream, once: the request is never
// written a second time (see sendOnce). Every final status (200–599, 5xx
// included) comes back as a Response, Relayed, and NotExecuted when the
// upstream marked it so (tools.HeaderNotExecuted). Errors wrap
// context.DeadlineExceeded or context.Canceled when ctx ended first,
// tools.ErrOutcomeUncertain when the request was written but no whole
// final answer came back (a lost connection, a malformed status line, a
// 1xx Go's client does not consume itself such as 101, a code outside
// 100–599: the upstream may have acted), tools.ErrUpstreamUnreachable
// when the request never reached it, tools.ErrResponseTooLarge when the
// body exceeds the cap.
func (t *Tool) Call(ctx context.Context, req *tools.Request) (*tools.Response, error) {
	var written atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				written.Store(true)
			}
		},
	})
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url.String(), bytes.NewReader(req.Arguments))
	if err != nil {
		return nil, fmt.Errorf("tool %q: build upstream request: %w", t.spec.Name, err)
	}
	sendOnce(httpReq)
	for name, values := range t.headers {
		httpReq.Header[name] = values
	}
	if t.host != "" {
		httpReq.Host = t.host
	}
	setCallHeaders(httpReq.Header, req)
	traceprop.InjectHTTP(ctx, httpReq.Header)

	resp, err := t.client.Do(httpReq)
	if err != nil {
		return nil, t.failure(ctx, "no response from upstream", written.Load(), err)
	}
	defer resp.Body.Close()
	if !tools.FinalStatus(resp.StatusCode) {
		// Not an answer the gateway may record or relay (101 would hand the
		// connection to another protocol; 600 or 099 is no HTTP status),
		// yet the upstream took the request: it may have acted. The body is
		// not read (after a 101 it is the raw connection, which may never end).
		return nil, fmt.Errorf("tool %q: POST %s: %w: the upstream answered %d, not a final status (200–599)",
			t.spec.Name, t.url.Redacted(), tools.ErrOutcomeUncertain, resp.StatusCode)
	}
	body, err := readCapped(resp, t.maxBytes)
	if err != nil {
		return nil, t.failure(ctx, "read upstream response", true, err)
	}
	return &tools.Response{
		Status:      resp.StatusCode,
		ContentType: resp.Header.Get("Content-Type"),
		Body:        body,
		Relayed:     true,
		NotExecuted: tools.HeaderNotExecuted(resp.Header),
	}, nil
}

// sendOnce makes sure the transport writes req at most once. net/http
// resends a request whose connection was reused and dropped before an
// answer when it deems the request replayable — which a POST carrying an
// Idempotency-Key header is, provided it can rewind the body (GetBody set,
// as NewRequest does for a bytes.Reader); HTTP/2 likewise only resends a
// written request whose body it can rewind. Without GetBody neither
// transport can write the request again; a connection lost after the
// request was written is reported to the gateway as an uncertain outcome
// instead.
func sendOnce(req *http.Request) {
	req.GetBody = nil
}

// setCallHeaders adds what identifies this call; the upstream can use the key
// to deduplicate and the fencing token to refuse a stale owner.
func setCallHeaders(h http.Header, req *tools.Request) {
	h.Set("Content-Type", "application/json")
	// The tenant-scoped key, never the client's: two tenants can send the
	// same key, and an upstream that deduplicates on the header alone must
	// not hand one tenant another's result.
	if req.ScopedKey != "" {
		h.Set(wire.HeaderIdempotencyKey, req.ScopedKey)
	}
	if req.Tenant != "" {
		h.Set(wire.HeaderTenant, req.Tenant)
	}
	if req.SessionID != "" {
		h.Set(wire.HeaderSessionID, req.SessionID)
	}
	if req.HasStep {
		h.Set(wire.HeaderStepIndex, strconv.FormatUint(req.StepIndex, 10))
	}
	if req.FencingToken > 0 {
		h.Set(wire.HeaderFencingToken, strconv.FormatInt(req.FencingToken, 10))
	}
	if req.ExecutionID != "" {
		h.Set(wire.HeaderExecutionID, req.ExecutionID)
	}
}
