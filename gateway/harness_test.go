package gateway_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/boltstore"
	"github.com/toolgateway/toolgateway/gateway/idempotency/pgstore"
	"github.com/toolgateway/toolgateway/gateway/idempotency/redisstore"
	"github.com/toolgateway/toolgateway/internal/pgtest"
	"github.com/toolgateway/toolgateway/internal/redistest"
	"github.com/toolgateway/toolgateway/keyderive"
	"github.com/toolgateway/toolgateway/tools"
)

// testTool is a real in-process tool whose behaviour a test scripts and whose
// executions it counts, per idempotency key and in total.
type testTool struct {
	name     string
	schema   string
	readOnly bool

	mu      sync.Mutex
	perKey  map[string]int
	total   atomic.Int64
	started chan *tools.Request // receives each request as it starts, if non-nil
	// behave decides the outcome; nil means 200 {"ok":true,"n":<count>}.
	behave func(ctx context.Context, req *tools.Request) (*tools.Response, error)
}

func newTestTool(name string) *testTool {
	return &testTool{name: name, perKey: map[string]int{}}
}

func (t *testTool) Spec() tools.Spec {
	return tools.Spec{Name: t.name, Description: "test tool " + t.name, InputSchema: json.RawMessage(t.schema), ReadOnly: t.readOnly}
}

func (t *testTool) Call(ctx context.Context, req *tools.Request) (*tools.Response, error) {
	n := t.total.Add(1)
	t.mu.Lock()
	t.perKey[req.IdempotencyKey]++
	t.mu.Unlock()
	if t.started != nil {
		t.started <- req
	}
	if t.behave != nil {
		return t.behave(ctx, req)
	}
	return tools.JSON(200, map[string]any{"ok": true, "n": n, "execution_id": req.ExecutionID})
}

func (t *testTool) runs(key string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.perKey[key]
}

// storeKind names a store the gateway tests run against.
type storeKind string

const (
	storeRedis    storeKind = "redis"
	storeEmbedded storeKind = "embedded"
	storePostgres storeKind = "postgres"
)

var allStores = []storeKind{storeRedis, storeEmbedded, storePostgres}

// openPostgres opens a PostgreSQL store on schema (a schema of the test's
// own, from pgtest.Schema); stores opened on one schema share records and
// limits, as replicas do. The pool is small: the gateway tests run in
// parallel on a server other tests share.
func openPostgres(t testing.TB, url, schema string) *pgstore.Store {
	t.Helper()
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	s, err := pgstore.Open(t.Context(), url+sep+"pool_max_conns=8", pgstore.Options{Schema: schema, SweepInterval: -1})
	if err != nil {
		t.Fatalf("open postgres store: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// newStore opens a fresh, isolated store of the given kind.
func newStore(t testing.TB, kind storeKind) idempotency.Store {
	t.Helper()
	switch kind {
	case storeRedis:
		client := redis.NewClient(&redis.Options{Addr: redistest.Addr(t)})
		prefix := redistest.Prefix("gwtest")
		s := redisstore.New(client, redisstore.Options{Prefix: prefix})
		t.Cleanup(func() {
			redistest.CleanPrefix(context.Background(), client, prefix)
			_ = s.Close()
			_ = client.Close()
		})
		return s
	case storeEmbedded:
		s, err := boltstore.Open(filepath.Join(t.TempDir(), "gw.db"), boltstore.Options{})
		if err != nil {
			t.Fatalf("open embedded store: %v", err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	case storePostgres:
		url := pgtest.URL(t)
		return openPostgres(t, url, pgtest.Schema(t, url))
	}
	t.Fatalf("unknown store %q", kind)
	return nil
}

// harness is a gateway served over real HTTP on loopback.
type harness struct {
	t      testing.TB
	gw     *gateway.Server
	srv    *httptest.Server
	store  idempotency.Store
	client *http.Client
	reg    *prometheus.Registry
	tools  *tools.Registry
}

type harnessOption func(*gateway.Options)

func withLockTTL(d time.Duration) harnessOption {
	return func(o *gateway.Options) { o.LockTTL = d }
}

func withPolicy(tool string, p tools.Policy) harnessOption {
	return func(o *gateway.Options) {
		if o.Policies == nil {
			o.Policies = map[string]tools.Policy{}
		}
		o.Policies[tool] = p
	}
}

func withTenants(tokens map[string]string) harnessOption {
	return func(o *gateway.Options) {
		for name, token := range tokens {
			o.Tenants = append(o.Tenants, gateway.Tenant{Name: name, TokenSHA256: sha256.Sum256([]byte(token))})
		}
	}
}

func withAdmin(token string) harnessOption {
	return func(o *gateway.Options) {
		sum := sha256.Sum256([]byte(token))
		o.AdminTokenSHA256 = &sum
	}
}

func withKeyMode(m gateway.KeyMode) harnessOption {
	return func(o *gateway.Options) { o.KeyMode = m }
}

func withMaxBody(n int64) harnessOption {
	return func(o *gateway.Options) { o.MaxBodyBytes = n }
}

func withStore(s idempotency.Store) harnessOption {
	return func(o *gateway.Options) { o.Store = s }
}

func newHarness(t testing.TB, kind storeKind, toolset []tools.Tool, opts ...harnessOption) *harness {
	t.Helper()
	registry := tools.NewRegistry()
	for _, tool := range toolset {
		if err := registry.Add(tool); err != nil {
			t.Fatalf("add tool: %v", err)
		}
	}
	reg := prometheus.NewRegistry()
	o := gateway.Options{Tools: registry, Registerer: reg, Gatherer: reg}
	for _, opt := range opts {
		opt(&o)
	}
	if o.Store == nil {
		o.Store = newStore(t, kind)
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
	return &harness{
		t: t, gw: gw, srv: srv, store: o.Store, reg: reg, tools: registry,
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second},
	}
}

// callSpec is one request to the tool API.
type callSpec struct {
	tool    string
	session string
	step    uint64
	args    string
	key     string // overrides the derived key
	headers map[string]string
	omit    []string // headers to leave out
	token   string
	method  string
}

// derivedKey computes the contract's key for a call.
func derivedKey(t testing.TB, session string, step uint64, tool, args string) string {
	t.Helper()
	k, err := keyderive.Key(session, step, tool, []byte(args))
	if err != nil {
		t.Fatalf("derive key: %v", err)
	}
	return k
}

// response is a received response, body read.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) problem(t testing.TB) map[string]any {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("want a problem+json response, got %d %q: %s", r.status, ct, r.body)
	}
	var p map[string]any
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("problem body: %v: %s", err, r.body)
	}
	return p
}

func (h *harness) do(c callSpec) response {
	h.t.Helper()
	r, err := h.try(c)
	if err != nil {
		h.t.Fatalf("request: %v", err)
	}
	return r
}

func (h *harness) try(c callSpec) (response, error) {
	if c.args == "" {
		c.args = "{}"
	}
	if c.method == "" {
		c.method = http.MethodPost
	}
	req, err := http.NewRequest(c.method, h.srv.URL+"/api/tools/v1/"+c.tool, bytes.NewBufferString(c.args))
	if err != nil {
		return response{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	key := c.key
	if key == "" && c.session != "" {
		k, err := keyderive.Key(c.session, c.step, c.tool, []byte(c.args))
		if err == nil {
			key = k
		}
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	if c.session != "" {
		req.Header.Set("Agent-Session-Id", c.session)
		req.Header.Set("Agent-Step-Index", strconv.FormatUint(c.step, 10))
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range c.headers {
		req.Header.Set(k, v)
	}
	for _, k := range c.omit {
		req.Header.Del(k)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, err
	}
	return response{status: resp.StatusCode, header: resp.Header, body: body}, nil
}

// get sends a GET with an optional bearer token.
func (h *harness) get(path, token string) response {
	return h.send(http.MethodGet, path, token)
}

func (h *harness) send(method, path, token string) response {
	h.t.Helper()
	req, err := http.NewRequest(method, h.srv.URL+path, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: body}
}

// counter reads gateway_requests_total{tool,outcome}, any door.
func (h *harness) counter(tool, outcome string) float64 {
	h.t.Helper()
	return h.counterAPI("", tool, outcome)
}

// counterAPI reads gateway_requests_total{api,tool,outcome}; api "" sums
// both doors.
func (h *harness) counterAPI(api, tool, outcome string) float64 {
	h.t.Helper()
	families, err := h.reg.Gather()
	if err != nil {
		h.t.Fatal(err)
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

// wantProblem asserts status and code of a problem response.
func wantProblem(t testing.TB, r response, status int, code string) map[string]any {
	t.Helper()
	if r.status != status {
		t.Fatalf("status = %d, want %d (%s): %s", r.status, status, code, r.body)
	}
	p := r.problem(t)
	if p["code"] != code {
		t.Fatalf("code = %v, want %s: %s", p["code"], code, r.body)
	}
	if int(p["status"].(float64)) != status {
		t.Fatalf("problem status = %v, want %d", p["status"], status)
	}
	if r.header.Get("X-Request-Id") == "" {
		t.Fatalf("no X-Request-Id on %d %s", status, code)
	}
	return p
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// hookStore wraps a store to run callbacks around Complete, so a test can
// interleave another request with a completion deliberately.
type hookStore struct {
	idempotency.Store
	beforeComplete func()
	afterComplete  func()
	down           atomic.Bool
	// failCompletes makes that many Complete calls fail as if the store
	// were restarting, before they reach it.
	failCompletes atomic.Int32
}

var errStoreDown = errors.New("hookstore: store down")

func (s *hookStore) Claim(ctx context.Context, req idempotency.ClaimRequest) (idempotency.Decision, error) {
	if s.down.Load() {
		return idempotency.Decision{}, errStoreDown
	}
	return s.Store.Claim(ctx, req)
}

func (s *hookStore) Complete(ctx context.Context, l idempotency.Lease, resp idempotency.StoredResponse, ttl time.Duration) error {
	if s.failCompletes.Add(-1) >= 0 {
		return errors.New("hookstore: LOADING Redis is loading the dataset in memory")
	}
	if s.beforeComplete != nil {
		s.beforeComplete()
	}
	err := s.Store.Complete(ctx, l, resp, ttl)
	if s.afterComplete != nil {
		s.afterComplete()
	}
	return err
}

func mustJSON(t testing.TB, b []byte) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("json: %v: %s", err, b)
	}
	return v
}

// wholeSeconds is the contract's Retry-After: whole seconds ≥ 1.
var wholeSeconds = regexp.MustCompile(`^[1-9][0-9]*$`)

// wantContractProblem checks the complete RFC 9457 shape of section 2:
// type, title, status, detail, code and retryable, served as
// application/problem+json with a gateway-minted X-Request-Id.
func wantContractProblem(t testing.TB, r response, status int, code string, retryable bool) map[string]any {
	t.Helper()
	p := wantProblem(t, r, status, code)
	for _, member := range []string{"type", "title", "detail"} {
		if s, ok := p[member].(string); !ok || s == "" {
			t.Fatalf("%s: problem member %q missing or empty: %s", code, member, r.body)
		}
	}
	if got, ok := p["retryable"].(bool); !ok || got != retryable {
		t.Fatalf("%s: retryable = %v, want %v", code, p["retryable"], retryable)
	}
	wantRequestID(t, r.header)
	return p
}

// wantRequestID checks X-Request-Id is a ULID minted by the gateway.
func wantRequestID(t testing.TB, h http.Header) string {
	t.Helper()
	id := h.Get("X-Request-Id")
	if _, err := ulid.ParseStrict(id); err != nil {
		t.Fatalf("X-Request-Id %q is not a ULID: %v", id, err)
	}
	return id
}

// rawKey hashes the contract's key input by hand, independently of keyderive.
func rawKey(session string, step uint64, tool, canonical string) string {
	sum := sha256.Sum256([]byte(session + ":" + strconv.FormatUint(step, 10) + ":" + tool + ":" + canonical))
	return hex.EncodeToString(sum[:])
}

// scriptedTool answers by the "mode" member of its arguments.
func scriptedTool(name string) *testTool {
	tool := newTestTool(name)
	tool.behave = func(ctx context.Context, req *tools.Request) (*tools.Response, error) {
		var args struct {
			Mode string `json:"mode"`
		}
		_ = json.Unmarshal(req.Arguments, &args)
		switch args.Mode {
		case "fail":
			return nil, errors.New("scripted failure")
		case "unreachable":
			return nil, tools.ErrUpstreamUnreachable
		case "hang":
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return tools.JSON(200, map[string]any{"ok": true})
	}
	return tool
}
