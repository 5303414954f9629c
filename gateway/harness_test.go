package gateway_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/oklog/ulid/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/gatewaytest"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/pgstore"
	"github.com/toolgateway/toolgateway/gateway/mcpserver"
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

// storeKind names a store the gateway tests run against (gatewaytest).
type storeKind = gatewaytest.StoreKind

const (
	storeRedis    = gatewaytest.Redis
	storeEmbedded = gatewaytest.Embedded
	storePostgres = gatewaytest.Postgres
)

var allStores = gatewaytest.AllStores

// openPostgres opens a PostgreSQL store on schema (gatewaytest.OpenPostgres).
func openPostgres(t testing.TB, url, schema string) *pgstore.Store {
	t.Helper()
	return gatewaytest.OpenPostgres(t, url, schema)
}

// newStore opens a fresh, isolated store of the given kind.
func newStore(t testing.TB, kind storeKind) idempotency.Store {
	t.Helper()
	return gatewaytest.NewStore(t, kind)
}

// harness is a gateway served over real HTTP on loopback
// (gatewaytest.Harness, with POST /mcp mounted as the program does), seen
// through the names these tests use.
type harness struct {
	*gatewaytest.Harness
	t      testing.TB
	gw     *gateway.Server
	srv    *httptest.Server
	store  idempotency.Store
	client *http.Client
	reg    *prometheus.Registry
	tools  *tools.Registry
}

type harnessOption = gatewaytest.Option

func withLockTTL(d time.Duration) harnessOption {
	return func(o *callpath.Options) { o.LockTTL = d }
}

func withPolicy(tool string, p tools.Policy) harnessOption {
	return gatewaytest.WithPolicy(tool, p)
}

func withTenants(tokens map[string]string) harnessOption {
	return gatewaytest.WithTenants(tokens)
}

func withAdmin(token string) harnessOption {
	return func(o *callpath.Options) {
		sum := sha256.Sum256([]byte(token))
		o.AdminTokenSHA256 = &sum
	}
}

func withKeyMode(m callpath.KeyMode) harnessOption {
	return func(o *callpath.Options) { o.KeyMode = m }
}

func withMaxBody(n int64) harnessOption {
	return func(o *callpath.Options) { o.MaxBodyBytes = n }
}

func withStore(s idempotency.Store) harnessOption {
	return func(o *callpath.Options) { o.Store = s }
}

func newHarness(t testing.TB, kind storeKind, toolset []tools.Tool, opts ...harnessOption) *harness {
	t.Helper()
	mountMCP := func(o *callpath.Options) { o.Mounts = []callpath.Mount{mcpserver.Mount(mcpserver.Options{})} }
	h := gatewaytest.New(t, kind, toolset, append([]harnessOption{mountMCP}, opts...)...)
	return &harness{Harness: h, t: t, gw: h.GW, srv: h.Srv, store: h.Store, client: h.Client, reg: h.Reg, tools: h.Tools}
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
	return gatewaytest.DerivedKey(t, session, step, tool, args)
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
	r, err := h.Try(gatewaytest.Call{Tool: c.tool, Session: c.session, Step: c.step, Args: c.args, Key: c.key,
		Headers: c.headers, Omit: c.omit, Token: c.token, Method: c.method})
	return fromResponse(r), err
}

// fromResponse is a gatewaytest.Response under this file's names.
func fromResponse(r gatewaytest.Response) response {
	return response{status: r.Status, header: r.Header, body: r.Body}
}

// get sends a GET with an optional bearer token.
func (h *harness) get(path, token string) response {
	return h.send(http.MethodGet, path, token)
}

func (h *harness) send(method, path, token string) response {
	h.t.Helper()
	return fromResponse(h.Send(method, path, token))
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
	return h.CounterAPI(api, tool, outcome)
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
	gatewaytest.Eventually(t, within, what, cond)
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
	return gatewaytest.MustJSON(t, b)
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

// The MCP client of the tests that count or trace calls over /mcp too
// (gatewaytest's go-sdk client).

type mcpClientOptions = gatewaytest.MCPClientOptions

func (h *harness) mcpSession(o mcpClientOptions) *mcp.ClientSession {
	h.t.Helper()
	return h.MCPSession(o)
}

// rawMCP posts body to /mcp (gatewaytest.Harness.RawMCP).
func (h *harness) rawMCP(body, version string, header http.Header) response {
	h.t.Helper()
	return fromResponse(h.RawMCP(body, version, header))
}

var (
	identityMeta  = gatewaytest.IdentityMeta
	mcpCall       = gatewaytest.MCPCall
	wantRPCError  = gatewaytest.WantRPCError
	wantExecuted  = gatewaytest.WantExecuted
	wantErrorMeta = gatewaytest.WantErrorMeta
)

// rpcErrorOf decodes a JSON-RPC error response.
func rpcErrorOf(t testing.TB, r response) (code int64, data map[string]any) {
	t.Helper()
	return gatewaytest.RPCErrorOf(t, gatewaytest.Response{Status: r.status, Header: r.header, Body: r.body})
}
