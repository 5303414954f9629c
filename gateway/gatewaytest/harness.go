package gatewaytest

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/pgstore"
	"github.com/toolgateway/toolgateway/keyderive"
	"github.com/toolgateway/toolgateway/tools"
)

// Harness is a gateway served over real HTTP on loopback.
type Harness struct {
	T      testing.TB
	GW     *gateway.Server
	Srv    *httptest.Server
	Store  idempotency.Store
	Client *http.Client
	// Reg is the gateway's private metrics registry.
	Reg   *prometheus.Registry
	Tools *tools.Registry
}

// Option changes the gateway's options before the harness builds it.
type Option func(*callpath.Options)

// New serves a gateway with toolset on a fresh store of kind (unless an
// option sets Options.Store), closed when the test ends. A PostgreSQL
// store gets its own limiter, as the program wires it.
func New(t testing.TB, kind StoreKind, toolset []tools.Tool, opts ...Option) *Harness {
	t.Helper()
	registry := tools.NewRegistry()
	for _, tool := range toolset {
		if err := registry.Add(tool); err != nil {
			t.Fatalf("add tool: %v", err)
		}
	}
	reg := prometheus.NewRegistry()
	o := callpath.Options{Tools: registry, Registerer: reg, Gatherer: reg}
	for _, opt := range opts {
		opt(&o)
	}
	if o.Store == nil {
		o.Store = NewStore(t, kind)
	}
	if pg, ok := o.Store.(*pgstore.Store); ok && o.Limiter == nil {
		o.Limiter = pg.Limiter() // as the program wires it (limiterFor)
	}
	gw, err := gateway.NewServer(o)
	if err != nil {
		t.Fatalf("new server: %v", err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	return &Harness{
		T: t, GW: gw, Srv: srv, Store: o.Store, Reg: reg, Tools: registry,
		Client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second},
	}
}

// Call is one request to the tool API.
type Call struct {
	Tool    string
	Session string
	Step    uint64
	// Args are the arguments as sent; "" sends {}.
	Args string
	// Key overrides the derived key.
	Key     string
	Headers map[string]string
	// Omit are headers to leave out.
	Omit   []string
	Token  string
	Method string // default POST
}

// Response is a received response, body read.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Problem decodes an application/problem+json response.
func (r Response) Problem(t testing.TB) map[string]any {
	t.Helper()
	if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("want a problem+json response, got %d %q: %s", r.Status, ct, r.Body)
	}
	var p map[string]any
	if err := json.Unmarshal(r.Body, &p); err != nil {
		t.Fatalf("problem body: %v: %s", err, r.Body)
	}
	return p
}

// Do sends c and fails the test when the request fails.
func (h *Harness) Do(c Call) Response {
	h.T.Helper()
	r, err := h.Try(c)
	if err != nil {
		h.T.Fatalf("request: %v", err)
	}
	return r
}

// Try sends c: the identity headers of its session and step, with the
// derived key unless c.Key is set.
func (h *Harness) Try(c Call) (Response, error) {
	if c.Args == "" {
		c.Args = "{}"
	}
	if c.Method == "" {
		c.Method = http.MethodPost
	}
	req, err := http.NewRequest(c.Method, h.Srv.URL+"/api/tools/v1/"+c.Tool, bytes.NewBufferString(c.Args))
	if err != nil {
		return Response{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	key := c.Key
	if key == "" && c.Session != "" {
		k, err := keyderive.Key(c.Session, c.Step, c.Tool, []byte(c.Args))
		if err == nil {
			key = k
		}
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	if c.Session != "" {
		req.Header.Set("Agent-Session-Id", c.Session)
		req.Header.Set("Agent-Step-Index", strconv.FormatUint(c.Step, 10))
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	for k, v := range c.Headers {
		req.Header.Set(k, v)
	}
	for _, k := range c.Omit {
		req.Header.Del(k)
	}
	return h.roundTrip(req)
}

// Send sends a request without a body, with an optional bearer token.
func (h *Harness) Send(method, path, token string) Response {
	h.T.Helper()
	req, err := http.NewRequest(method, h.Srv.URL+path, nil)
	if err != nil {
		h.T.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	r, err := h.roundTrip(req)
	if err != nil {
		h.T.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// roundTrip sends req and reads the whole response.
func (h *Harness) roundTrip(req *http.Request) (Response, error) {
	resp, err := h.Client.Do(req)
	if err != nil {
		return Response{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return Response{}, err
	}
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: body}, nil
}

// CounterAPI reads gateway_requests_total{api,tool,outcome}; api "" sums
// both doors.
func (h *Harness) CounterAPI(api, tool, outcome string) float64 {
	h.T.Helper()
	families, err := h.Reg.Gather()
	if err != nil {
		h.T.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != "gateway_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["tool"] == tool && labels["outcome"] == outcome && (api == "" || labels["api"] == api) {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// WantProblem asserts status and code of a problem response, which carries
// an X-Request-Id.
func WantProblem(t testing.TB, r Response, status int, code string) map[string]any {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status = %d, want %d (%s): %s", r.Status, status, code, r.Body)
	}
	p := r.Problem(t)
	if p["code"] != code {
		t.Fatalf("code = %v, want %s: %s", p["code"], code, r.Body)
	}
	if int(p["status"].(float64)) != status {
		t.Fatalf("problem status = %v, want %d", p["status"], status)
	}
	if r.Header.Get("X-Request-Id") == "" {
		t.Fatalf("no X-Request-Id on %d %s", status, code)
	}
	return p
}

// DerivedKey computes the contract's key for a call.
func DerivedKey(t testing.TB, session string, step uint64, tool, args string) string {
	t.Helper()
	k, err := keyderive.Key(session, step, tool, []byte(args))
	if err != nil {
		t.Fatalf("derive key: %v", err)
	}
	return k
}

// Eventually polls cond until it holds or the deadline passes.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// MustJSON decodes a JSON object.
func MustJSON(t testing.TB, b []byte) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("json: %v: %s", err, b)
	}
	return v
}

// WithTenants turns bearer auth on: one tenant per name, with its token.
func WithTenants(tokens map[string]string) Option {
	return func(o *callpath.Options) {
		for name, token := range tokens {
			o.Tenants = append(o.Tenants, callpath.Tenant{Name: name, TokenSHA256: sha256.Sum256([]byte(token))})
		}
	}
}

// WithPolicy configures the policy of tool.
func WithPolicy(tool string, p tools.Policy) Option {
	return func(o *callpath.Options) {
		if o.Policies == nil {
			o.Policies = map[string]tools.Policy{}
		}
		o.Policies[tool] = p
	}
}
