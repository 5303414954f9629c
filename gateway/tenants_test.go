package gateway_test

import (
	"context"
	"crypto/sha256"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/tools"
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

// TestOpaqueKeysAreScopedByTenant: in opaque mode two tenants may pick the
// same key for different arguments; neither sees idempotency_key_reused or
// the other's outcome.
func TestOpaqueKeysAreScopedByTenant(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		tool := newTestTool("charge")
		h := newHarness(t, kind, []tools.Tool{tool}, withTenants(twoTenants), withKeyMode(gateway.KeyModeOpaque))
		a := h.do(callSpec{tool: "charge", key: "order-1", args: `{"cents":100}`, token: "tok-acme"})
		wantProblem(t, h.do(callSpec{tool: "charge", key: "order-1", args: `{"cents":999}`, token: "tok-acme"}), 422, wire.CodeIdempotencyKeyReused)
		g := h.do(callSpec{tool: "charge", key: "order-1", args: `{"cents":999}`, token: "tok-globex"})
		if a.status != 200 || g.status != 200 || g.header.Get("Idempotent-Replayed") != "false" {
			t.Fatalf("acme %d, globex %d %s", a.status, g.status, g.body)
		}
		again := h.do(callSpec{tool: "charge", key: "order-1", args: `{"cents":999}`, token: "tok-globex"})
		if again.header.Get("Tool-Execution-Id") != g.header.Get("Tool-Execution-Id") || again.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("globex replay: %v", again.header)
		}
	})
}

// TestAdminAPIIsScopedByTenant: the admin API addresses a record by tenant,
// shows only that tenant's record, deletes only it, and accepts neither
// tenant tokens nor path segments that are not names.
func TestAdminAPIIsScopedByTenant(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		tool := newTestTool("provision")
		h := newHarness(t, kind, []tools.Tool{tool}, withTenants(twoTenants), withAdmin("tok-admin"))
		call := callSpec{tool: "provision", session: "sess", step: 1, args: `{"x":1}`, token: "tok-acme"}
		key := derivedKey(t, "sess", 1, "provision", call.args)
		h.do(call)

		acmePath := "/admin/v1/records/acme/provision/" + key
		globexPath := "/admin/v1/records/globex/provision/" + key
		r := h.get(acmePath, "tok-admin")
		if r.status != 200 {
			t.Fatalf("admin get acme: %d %s", r.status, r.body)
		}
		if rec := mustJSON(t, r.body); rec["tenant"] != "acme" || rec["key"] != key || rec["state"] != "COMPLETED" {
			t.Fatalf("admin record %v", rec)
		}
		wantProblem(t, h.get(globexPath, "tok-admin"), 404, wire.CodeRecordNotFound)

		other := call
		other.token = "tok-globex"
		h.do(other)
		if r := h.send(http.MethodDelete, acmePath, "tok-admin"); r.status != 204 {
			t.Fatalf("admin delete: %d %s", r.status, r.body)
		}
		wantProblem(t, h.get(acmePath, "tok-admin"), 404, wire.CodeRecordNotFound)
		if r := h.get(globexPath, "tok-admin"); r.status != 200 || mustJSON(t, r.body)["tenant"] != "globex" {
			t.Fatalf("deleting acme's record touched globex's: %d %s", r.status, r.body)
		}
		if r := h.do(call); r.header.Get("Idempotent-Replayed") != "false" {
			t.Fatal("acme's call did not run again after the delete")
		}
		if r := h.do(other); r.header.Get("Idempotent-Replayed") != "true" {
			t.Fatal("globex's record was lost")
		}

		// Tenant tokens do not open the admin API; the admin token does not
		// open the tool API.
		for _, tok := range []string{"tok-acme", "tok-globex", "", "tok-admin2"} {
			wantProblem(t, h.get(globexPath, tok), 401, wire.CodeUnauthorized)
			wantProblem(t, h.send(http.MethodDelete, globexPath, tok), 401, wire.CodeUnauthorized)
		}
		adminAsTenant := call
		adminAsTenant.token = "tok-admin"
		wantProblem(t, h.do(adminAsTenant), 401, wire.CodeUnauthorized)
		// Path segments that are not tenant or tool names never reach the store.
		for _, p := range []string{
			"/admin/v1/records/ac%3Ame/provision/" + key,
			"/admin/v1/records/ACME/provision/" + key,
			"/admin/v1/records/acme%0A/provision/" + key,
			"/admin/v1/records/acme/pr%D0%BEvision/" + key,
		} {
			wantProblem(t, h.get(p, "tok-admin"), 404, wire.CodeRecordNotFound)
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
	tenant := func(name, token string) gateway.Tenant {
		return gateway.Tenant{Name: name, TokenSHA256: sha256.Sum256([]byte(token))}
	}
	admin := sha256.Sum256([]byte("tok-a"))
	cases := map[string]gateway.Options{
		"empty name":             {Tenants: []gateway.Tenant{tenant("", "t")}},
		"colon in name":          {Tenants: []gateway.Tenant{tenant("a:b", "t")}},
		"brace in name":          {Tenants: []gateway.Tenant{tenant("a{b}", "t")}},
		"newline in name":        {Tenants: []gateway.Tenant{tenant("acme\n", "t")}},
		"upper case name":        {Tenants: []gateway.Tenant{tenant("Acme", "t")}},
		"name too long":          {Tenants: []gateway.Tenant{tenant(strings.Repeat("a", 65), "t")}},
		"same name twice":        {Tenants: []gateway.Tenant{tenant("acme", "t1"), tenant("acme", "t2")}},
		"same token twice":       {Tenants: []gateway.Tenant{tenant("acme", "t"), tenant("globex", "t")}},
		"admin token = a tenant": {Tenants: []gateway.Tenant{tenant("acme", "tok-a")}, AdminTokenSHA256: &admin},
	}
	for name, o := range cases {
		o.Store, o.Tools = store, registry
		reg := prometheus.NewRegistry()
		o.Registerer, o.Gatherer = reg, reg
		if _, err := gateway.NewServer(o); err == nil {
			t.Errorf("%s: NewServer accepted it", name)
		}
	}
	ok := gateway.Options{Store: store, Tools: registry, Tenants: []gateway.Tenant{tenant("acme", "t1"), tenant("globex_2", "t2")}, AdminTokenSHA256: &admin}
	reg := prometheus.NewRegistry()
	ok.Registerer, ok.Gatherer = reg, reg
	if _, err := gateway.NewServer(ok); err != nil {
		t.Fatalf("valid tenants refused: %v", err)
	}
}
