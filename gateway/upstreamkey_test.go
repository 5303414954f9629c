package gateway_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/tools/httptool"
	"github.com/toolgateway/toolgateway/wire"
)

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
