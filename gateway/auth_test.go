package gateway_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/tools/httptool"
	"github.com/toolgateway/toolgateway/wire"
)

var twoTenants = map[string]string{"acme": "tok-acme", "globex": "tok-globex"}

// TestTenantsCannotBlockEachOther holds a call of tenant acme in progress
// and shows that tenant globex, sending the very same call (same key, same
// session and step), is neither answered 409 nor replayed, and that
// neither step conflicts nor key reuse cross tenants.
func TestTenantsCannotBlockEachOther(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		tool := newTestTool("provision")
		release := make(chan struct{})
		started := make(chan struct{}, 1)
		tool.behave = func(ctx context.Context, req *tools.Request) (*tools.Response, error) {
			if req.Tenant == "acme" && req.StepIndex == 1 {
				started <- struct{}{}
				select {
				case <-release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return tools.JSON(200, map[string]any{"tenant": req.Tenant, "execution_id": req.ExecutionID})
		}
		h := newHarness(t, kind, []tools.Tool{tool}, withTenants(twoTenants))
		// Registered after the harness, so it runs before the server closes:
		// a failing test must not leave the tool blocked.
		unblock := sync.OnceFunc(func() { close(release) })
		t.Cleanup(unblock)
		call := callSpec{tool: "provision", session: "shared", step: 1, args: `{"x":1}`, token: "tok-acme"}

		slow := make(chan response, 1)
		go func() {
			r, err := h.try(call)
			if err != nil {
				t.Errorf("acme's slow call: %v", err)
			}
			slow <- r
		}()
		<-started

		// Within acme the key is blocked ...
		wantProblem(t, h.do(call), 409, wire.CodeRequestInProgress)
		// ... and acme's step 1 is taken by the running call.
		wantProblem(t, h.do(callSpec{tool: "provision", session: "shared", step: 1, args: `{"x":2}`, token: "tok-acme"}), 422, wire.CodeStepConflict)

		// globex sends the identical call: its own record, run at once.
		other := call
		other.token = "tok-globex"
		r := h.do(other)
		if r.status != 200 || r.header.Get("Idempotent-Replayed") != "false" || !strings.Contains(string(r.body), `"tenant":"globex"`) {
			t.Fatalf("globex blocked by acme's call in progress: %d %v %s", r.status, r.header, r.body)
		}
		globexExec := r.header.Get("Tool-Execution-Id")

		unblock()
		a := <-slow
		if a.status != 200 || !strings.Contains(string(a.body), `"tenant":"acme"`) || a.header.Get("Tool-Execution-Id") == globexExec {
			t.Fatalf("acme's call: %d %s", a.status, a.body)
		}
		// Each tenant replays its own outcome, never the other's.
		for token, want := range map[string]string{"tok-acme": a.header.Get("Tool-Execution-Id"), "tok-globex": globexExec} {
			c := call
			c.token = token
			r := h.do(c)
			if r.header.Get("Idempotent-Replayed") != "true" || r.header.Get("Tool-Execution-Id") != want {
				t.Fatalf("%s replay: %d %v, want execution %s", token, r.status, r.header, want)
			}
		}

		// A step acme completed does not conflict with globex's same step.
		h.do(callSpec{tool: "provision", session: "s2", step: 3, args: `{"y":1}`, token: "tok-acme"})
		wantProblem(t, h.do(callSpec{tool: "provision", session: "s2", step: 3, args: `{"y":2}`, token: "tok-acme"}), 422, wire.CodeStepConflict)
		if r := h.do(callSpec{tool: "provision", session: "s2", step: 3, args: `{"y":2}`, token: "tok-globex"}); r.status != 200 || r.header.Get("Idempotent-Replayed") != "false" {
			t.Fatalf("globex step-conflicted with acme: %d %s", r.status, r.body)
		}
		if n := tool.total.Load(); n != 4 {
			t.Fatalf("tool ran %d times, want 4", n)
		}
	})
}

// TestUnauthorizedTouchesNothing: with auth configured, every request
// without a valid tenant (or admin) token is answered 401 with
// WWW-Authenticate, and makes no store call at all.
func TestUnauthorizedTouchesNothing(t *testing.T) {
	tool := newTestTool("provision")
	store := &countingStore{Store: newStore(t, storeEmbedded)}
	h := newHarness(t, storeEmbedded, []tools.Tool{tool}, withStore(store), withTenants(twoTenants), withAdmin("tok-admin"))
	args := `{"x":1}`
	key := derivedKey(t, "s", 1, "provision", args)

	authorizations := [][]string{
		nil,
		{""},
		{"Bearer"},
		{"Bearer "},
		{"Bearer wrong"},
		{"Bearer tok-acm"},
		{"Bearer tok-acmee"},
		{"Bearer TOK-ACME"},
		{"Basic dG9rLWFjbWU6"},
		{"tok-acme"},
		{"Bearer tok-admin"},
		{"Bearer tok-acme", "Bearer tok-acme"},
		{"Bearer tok-acme", "Bearer wrong"},
		{"Bearer tok-acme\x00"},
		{"Bearer " + strings.Repeat("a", 8<<10)},
	}
	send := func(method, path string, body string, auth []string) response {
		req, err := http.NewRequest(method, h.srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("Agent-Session-Id", "s")
		req.Header.Set("Agent-Step-Index", "1")
		req.Header["Authorization"] = auth
		if strings.ContainsRune(strings.Join(auth, ""), 0) {
			// net/http's client refuses a NUL in a header (and so does its
			// server); the handler is asked directly.
			in := httptest.NewRequest(method, path, strings.NewReader(body))
			in.Header = req.Header
			rec := httptest.NewRecorder()
			h.gw.ServeHTTP(rec, in)
			return response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
		}
		resp, err := h.client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return response{status: resp.StatusCode, header: resp.Header, body: b}
	}
	for _, auth := range authorizations {
		for _, target := range []struct{ method, path string }{
			{http.MethodPost, "/api/tools/v1/provision"},
			{http.MethodGet, "/api/tools/v1"},
			{http.MethodGet, "/api/tools/v1/provision"},
			{http.MethodPost, "/api/tools/v1/no-such-tool"},
		} {
			r := send(target.method, target.path, args, auth)
			wantProblem(t, r, 401, wire.CodeUnauthorized)
			if r.header.Get("WWW-Authenticate") == "" {
				t.Fatalf("401 without WWW-Authenticate for %q", auth)
			}
		}
		if auth == nil || auth[0] != "Bearer tok-admin" {
			for _, method := range []string{http.MethodGet, http.MethodDelete} {
				wantProblem(t, send(method, "/admin/v1/records/acme/provision/"+key, "", auth), 401, wire.CodeUnauthorized)
			}
		}
	}
	if n := store.calls.Load(); n != 0 {
		t.Fatalf("unauthorized requests made %d store calls", n)
	}
	if n := tool.total.Load(); n != 0 {
		t.Fatalf("the tool ran %d times without auth", n)
	}
	// A valid token gets through, so the counting store does count.
	r := h.do(callSpec{tool: "provision", session: "s", step: 1, args: args, token: "tok-acme"})
	if r.status != 200 || store.claims.Load() != 1 {
		t.Fatalf("authorized call: %d, claims %d", r.status, store.claims.Load())
	}
}

// TestNewServerRefusesUnenforceableTenants: tenant names go into every
// record's scope and every log line, so they are checked like tool names;
// duplicate names or tokens and an admin token shared with a tenant are
// refused.
func TestNewServerRefusesUnenforceableTenants(t *testing.T) {
	registry := tools.NewRegistry()
	if err := registry.Add(newTestTool("provision")); err != nil {
		t.Fatal(err)
	}
	store := newStore(t, storeEmbedded)
	tenant := func(name, token string) callpath.Tenant {
		return callpath.Tenant{Name: name, TokenSHA256: sha256.Sum256([]byte(token))}
	}
	admin := sha256.Sum256([]byte("tok-a"))
	cases := map[string]callpath.Options{
		"empty name":             {Tenants: []callpath.Tenant{tenant("", "t")}},
		"colon in name":          {Tenants: []callpath.Tenant{tenant("a:b", "t")}},
		"brace in name":          {Tenants: []callpath.Tenant{tenant("a{b}", "t")}},
		"newline in name":        {Tenants: []callpath.Tenant{tenant("acme\n", "t")}},
		"upper case name":        {Tenants: []callpath.Tenant{tenant("Acme", "t")}},
		"name too long":          {Tenants: []callpath.Tenant{tenant(strings.Repeat("a", 65), "t")}},
		"same name twice":        {Tenants: []callpath.Tenant{tenant("acme", "t1"), tenant("acme", "t2")}},
		"same token twice":       {Tenants: []callpath.Tenant{tenant("acme", "t"), tenant("globex", "t")}},
		"admin token = a tenant": {Tenants: []callpath.Tenant{tenant("acme", "tok-a")}, AdminTokenSHA256: &admin},
	}
	for name, o := range cases {
		o.Store, o.Tools = store, registry
		reg := prometheus.NewRegistry()
		o.Registerer, o.Gatherer = reg, reg
		if _, err := gateway.NewServer(o); err == nil {
			t.Errorf("%s: NewServer accepted it", name)
		}
	}
	ok := callpath.Options{Store: store, Tools: registry, Tenants: []callpath.Tenant{tenant("acme", "t1"), tenant("globex_2", "t2")}, AdminTokenSHA256: &admin}
	reg := prometheus.NewRegistry()
	ok.Registerer, ok.Gatherer = reg, reg
	if _, err := gateway.NewServer(ok); err != nil {
		t.Fatalf("valid tenants refused: %v", err)
	}
}

func TestTenantsAreIsolated(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		tool := newTestTool("provision")
		h := newHarness(t, kind, []tools.Tool{tool}, withTenants(map[string]string{"acme": "tok-acme", "globex": "tok-globex"}))
		c := callSpec{tool: "provision", session: "shared", step: 1, args: `{"x":1}`}

		c.token = ""
		wantProblem(t, h.do(c), 401, wire.CodeUnauthorized)
		c.token = "wrong"
		wantProblem(t, h.do(c), 401, wire.CodeUnauthorized)
		if tool.total.Load() != 0 {
			t.Fatal("tool ran without auth")
		}

		c.token = "tok-acme"
		a := h.do(c)
		c.token = "tok-globex"
		b := h.do(c)
		if a.status != 200 || b.status != 200 {
			t.Fatalf("tenants: %d %s / %d %s", a.status, a.body, b.status, b.body)
		}
		if b.header.Get("Idempotent-Replayed") != "false" || a.header.Get("Tool-Execution-Id") == b.header.Get("Tool-Execution-Id") {
			t.Fatal("tenant globex replayed tenant acme's record")
		}
		// No step conflict across tenants either.
		c2 := callSpec{tool: "provision", session: "shared", step: 1, args: `{"x":2}`, token: "tok-globex"}
		wantProblem(t, h.do(c2), 422, wire.CodeStepConflict) // globex's own step 1 is taken
		c3 := callSpec{tool: "provision", session: "shared", step: 2, args: `{"x":2}`, token: "tok-acme"}
		if r := h.do(c3); r.status != 200 {
			t.Fatalf("acme step 2: %d %s", r.status, r.body)
		}
		if tool.total.Load() != 3 {
			t.Fatalf("tool ran %d times, want 3", tool.total.Load())
		}
		// Discovery needs auth too.
		if r := h.get("/api/tools/v1", ""); r.status != 401 {
			t.Fatalf("discovery without token: %d", r.status)
		}
		if r := h.get("/api/tools/v1", "tok-acme"); r.status != 200 {
			t.Fatalf("discovery with token: %d", r.status)
		}
	})
}

// scopedKey computes the upstream key by hand, independently of keyderive:
// lowercase_hex(SHA-256(tenant ":" tool ":" key)).
func scopedKey(tenant, tool, key string) string {
	sum := sha256.Sum256([]byte(tenant + ":" + tool + ":" + key))
	return hex.EncodeToString(sum[:])
}

// dedupUpstream is an upstream that deduplicates on the Idempotency-Key
// header alone, as docs/tools.md tells upstreams to: the first answer it
// gave for a key is the answer to every later request with that key.
type dedupUpstream struct {
	mu      sync.Mutex
	answers map[string][]byte
	tenants map[string]string // key → Tool-Tenant seen with it
}

func (u *dedupUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	defer u.mu.Unlock()
	key := r.Header.Get(wire.HeaderIdempotencyKey)
	answer, seen := u.answers[key]
	if !seen {
		answer, _ = json.Marshal(map[string]string{"tenant": r.Header.Get(wire.HeaderTenant)})
		u.answers[key] = answer
		u.tenants[key] = r.Header.Get(wire.HeaderTenant)
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(answer)
}

// Two tenants sending the very same call (same session, step, arguments,
// hence the same Idempotency-Key) to an upstream that deduplicates on the
// header alone must each get their own answer: the gateway forwards the
// tenant-scoped key SHA-256(tenant:tool:key) and Tool-Tenant, never the
// client's key.
func TestUpstreamKeyIsTenantScoped(t *testing.T) {
	up := &dedupUpstream{answers: map[string][]byte{}, tenants: map[string]string{}}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	tool, err := httptool.New(httptool.Config{Name: "charge", URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, storeEmbedded, []tools.Tool{tool}, withTenants(twoTenants))

	acme := callSpec{tool: "charge", session: "shared", step: 1, args: `{"cents":100}`, token: "tok-acme"}
	globex := acme
	globex.token = "tok-globex"
	key := derivedKey(t, "shared", 1, "charge", `{"cents":100}`)
	for _, c := range []struct {
		call   callSpec
		tenant string
	}{{acme, "acme"}, {globex, "globex"}} {
		r := h.do(c.call)
		if r.status != 200 {
			t.Fatalf("%s: status %d: %s", c.tenant, r.status, r.body)
		}
		if got := mustJSON(t, r.body)["tenant"]; got != c.tenant {
			t.Fatalf("%s received the upstream's answer for %v", c.tenant, got)
		}
		scoped := scopedKey(c.tenant, "charge", key)
		up.mu.Lock()
		forwardedTenant, forwarded := up.tenants[scoped]
		up.mu.Unlock()
		if !forwarded || forwardedTenant != c.tenant {
			t.Fatalf("%s: upstream did not receive Idempotency-Key %s with Tool-Tenant %s (got %q)", c.tenant, scoped, c.tenant, forwardedTenant)
		}
	}
	if _, leaked := up.answers[key]; leaked {
		t.Fatal("the client's own key reached the upstream")
	}
}

// An in-process tool gets the same tenant-scoped key as Request.ScopedKey,
// next to the client's key.
func TestInProcessToolGetsScopedKey(t *testing.T) {
	tool := newTestTool("provision")
	var got []tools.Request
	var mu sync.Mutex
	tool.behave = func(_ context.Context, req *tools.Request) (*tools.Response, error) {
		mu.Lock()
		got = append(got, *req)
		mu.Unlock()
		return tools.JSON(200, map[string]any{})
	}
	h := newHarness(t, storeEmbedded, []tools.Tool{tool}, withTenants(twoTenants))
	for _, token := range []string{"tok-acme", "tok-globex"} {
		if r := h.do(callSpec{tool: "provision", session: "s", step: 0, args: `{}`, token: token}); r.status != 200 {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
	}
	key := derivedKey(t, "s", 0, "provision", `{}`)
	if len(got) != 2 {
		t.Fatalf("tool ran %d times, want 2", len(got))
	}
	for _, req := range got {
		if req.IdempotencyKey != key || req.ScopedKey != scopedKey(req.Tenant, "provision", key) {
			t.Fatalf("tenant %s: key %q scoped %q", req.Tenant, req.IdempotencyKey, req.ScopedKey)
		}
	}
	if got[0].ScopedKey == got[1].ScopedKey {
		t.Fatal("two tenants got one scoped key")
	}
}

// TestPreviousTokensAreTokens: a previous token (a rotation) authenticates
// as its tenant, and is refused when it would name two callers: equal to
// its own current token, another tenant's current or previous token, or
// the admin's current or previous token.
func TestPreviousTokensAreTokens(t *testing.T) {
	registry := tools.NewRegistry()
	if err := registry.Add(newTestTool("provision")); err != nil {
		t.Fatal(err)
	}
	store := newStore(t, storeEmbedded)
	hash := func(token string) *[sha256.Size]byte { h := sha256.Sum256([]byte(token)); return &h }
	tenant := func(name, token, previous string) callpath.Tenant {
		t := callpath.Tenant{Name: name, TokenSHA256: *hash(token)}
		if previous != "" {
			t.PreviousTokenSHA256 = hash(previous)
		}
		return t
	}
	cases := map[string]callpath.Options{
		"previous = own token":               {Tenants: []callpath.Tenant{tenant("acme", "t", "t")}},
		"previous = other tenant's token":    {Tenants: []callpath.Tenant{tenant("acme", "t1", "t2"), tenant("globex", "t2", "")}},
		"previous = other tenant's previous": {Tenants: []callpath.Tenant{tenant("acme", "t1", "old"), tenant("globex", "t2", "old")}},
		"previous = admin's token":           {Tenants: []callpath.Tenant{tenant("acme", "t1", "adm")}, AdminTokenSHA256: hash("adm")},
		"admin previous = a tenant's token":  {Tenants: []callpath.Tenant{tenant("acme", "t1", "")}, AdminTokenSHA256: hash("adm"), AdminPreviousTokenSHA256: hash("t1")},
		"admin previous = admin's token":     {AdminTokenSHA256: hash("adm"), AdminPreviousTokenSHA256: hash("adm")},
		"admin previous without a current":   {AdminPreviousTokenSHA256: hash("adm")},
	}
	for name, o := range cases {
		o.Store, o.Tools = store, registry
		reg := prometheus.NewRegistry()
		o.Registerer, o.Gatherer = reg, reg
		if _, err := gateway.NewServer(o); err == nil {
			t.Errorf("%s: NewServer accepted it", name)
		}
	}

	h := newHarness(t, storeEmbedded, []tools.Tool{newTestTool("provision")}, func(o *callpath.Options) {
		o.Tenants = []callpath.Tenant{tenant("acme", "new", "old"), tenant("globex", "g", "")}
	})
	for step, token := range []string{"new", "old"} {
		r := h.do(callSpec{tool: "provision", session: "rot", step: uint64(step), args: `{}`, token: token})
		if r.status != http.StatusOK {
			t.Fatalf("acme's %s token: %d %s", token, r.status, r.body)
		}
	}
	// The old token is acme's: its call replays acme's record, not globex's.
	r := h.do(callSpec{tool: "provision", session: "rot", step: 0, args: `{}`, token: "old"})
	if r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("acme's old token did not reach acme's record: %d replayed=%q", r.status, r.header.Get("Idempotent-Replayed"))
	}
	if err := h.gw.Reload(callpath.Settings{Tenants: []callpath.Tenant{tenant("acme", "new", ""), tenant("globex", "g", "")}}); err != nil {
		t.Fatal(err)
	}
	if r := h.do(callSpec{tool: "provision", session: "rot", step: 2, args: `{}`, token: "old"}); r.status != http.StatusUnauthorized {
		t.Fatalf("old token after the rotation ended: %d, want 401", r.status)
	}
}

// TestAuthCoversTheToolAPIOnly checks 401 on calls and discovery
// without a valid token (before the 404 of an unknown tool), and that
// health, readiness and metrics need none.
func TestAuthCoversTheToolAPIOnly(t *testing.T) {
	tool := newTestTool("echo")
	h := newHarness(t, storeEmbedded, []tools.Tool{tool}, withTenants(twoTenants))
	for _, path := range []string{"/api/tools/v1", "/api/tools/v1?format=openai", "/api/tools/v1/echo", "/api/tools/v1/no-such-tool"} {
		for _, token := range []string{"", "wrong"} {
			r := h.get(path, token)
			wantContractProblem(t, r, 401, wire.CodeUnauthorized, false)
		}
		if r := h.get(path, "tok-acme"); path != "/api/tools/v1/no-such-tool" && r.status != 200 {
			t.Fatalf("%s with a valid token: %d", path, r.status)
		}
	}
	r := h.do(callSpec{tool: "no-such-tool", session: "a", step: 1, args: `{}`})
	wantContractProblem(t, r, 401, wire.CodeUnauthorized, false)
	r = h.do(callSpec{tool: "echo", session: "a", step: 1, args: `{}`, token: "tok-globex"})
	if r.status != 200 {
		t.Fatalf("call with a valid token: %d %s", r.status, r.body)
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if r := h.get(path, ""); r.status != 200 {
			t.Fatalf("%s without a token: %d", path, r.status)
		}
	}
}
