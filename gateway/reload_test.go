package gateway_test

import (
	"context"
	"crypto/sha256"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/ratelimit"
	"github.com/toolgateway/toolgateway/tools"
)

func tenant(name, token string, limits callpath.TenantLimits) callpath.Tenant {
	return callpath.Tenant{Name: name, TokenSHA256: sha256.Sum256([]byte(token)), Limits: limits}
}

// Reload swaps tenants, the admin token, limits and policies at once, and
// refuses (changing nothing) what the Server cannot take at run time.
func TestServerReloadSwapsSettingsOrChangesNothing(t *testing.T) {
	tool := newTestTool("reload-echo")
	hang := newTestTool("reload-hang")
	hang.behave = func(ctx context.Context, _ *tools.Request) (*tools.Response, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	h := newHarness(t, storeEmbedded, []tools.Tool{tool, hang}, withTenants(map[string]string{"acme": "acme-token"}), withAdmin("admin-1"))
	if r := h.do(callSpec{tool: "reload-echo", session: "s", step: 1, token: "acme-token"}); r.status != 200 {
		t.Fatalf("acme: %d %s", r.status, r.body)
	}

	admin2 := sha256.Sum256([]byte("admin-2"))
	set := callpath.Settings{
		Tenants: []callpath.Tenant{
			tenant("beta", "beta-token", callpath.TenantLimits{Rate: ratelimit.Limit{Rate: 1, Period: time.Hour, Burst: 1}}),
		},
		AdminTokenSHA256: &admin2,
		Policies:         map[string]tools.Policy{"reload-hang": {Timeout: 50 * time.Millisecond}},
	}
	if err := h.gw.Reload(set); err != nil {
		t.Fatal(err)
	}
	if r := h.do(callSpec{tool: "reload-echo", session: "s", step: 2, token: "acme-token"}); r.status != 401 {
		t.Fatalf("removed tenant: %d, want 401", r.status)
	}
	if r := h.do(callSpec{tool: "reload-echo", session: "s", step: 1, token: "beta-token"}); r.status != 200 {
		t.Fatalf("new tenant: %d %s", r.status, r.body)
	}
	wantProblem(t, h.do(callSpec{tool: "reload-echo", session: "s", step: 2, token: "beta-token"}), http.StatusTooManyRequests, "rate_limited")
	wantProblem(t, h.do(callSpec{tool: "reload-hang", session: "s", step: 3, token: "beta-token"}), http.StatusTooManyRequests, "rate_limited")
	if r := h.get("/admin/v1/records/beta/reload-echo/x", "admin-1"); r.status != 401 {
		t.Fatalf("old admin token: %d, want 401", r.status)
	}
	if r := h.get("/admin/v1/records/beta/reload-echo/x", "admin-2"); r.status == 401 {
		t.Fatalf("new admin token: 401")
	}

	// The tenant loses its rate; the hang tool's new timeout applies.
	set.Tenants = []callpath.Tenant{tenant("beta", "beta-token", callpath.TenantLimits{})}
	if err := h.gw.Reload(set); err != nil {
		t.Fatal(err)
	}
	wantProblem(t, h.do(callSpec{tool: "reload-hang", session: "s", step: 3, token: "beta-token"}), http.StatusGatewayTimeout, "tool_timeout")

	refused := []struct {
		name string
		set  callpath.Settings
		want string
	}{
		{"auth off", callpath.Settings{AdminTokenSHA256: &admin2}, "auth cannot be turned on or off"},
		{"admin off", callpath.Settings{Tenants: set.Tenants}, "admin API cannot be enabled or disabled"},
		{"shared token", callpath.Settings{AdminTokenSHA256: &admin2, Tenants: []callpath.Tenant{
			tenant("a", "same", callpath.TenantLimits{}), tenant("b", "same", callpath.TenantLimits{})}}, "same token"},
		{"bad lease expiry", callpath.Settings{AdminTokenSHA256: &admin2, Tenants: set.Tenants,
			Policies: map[string]tools.Policy{"reload-echo": {LeaseExpiry: "never"}}}, "reload-echo"},
	}
	for _, c := range refused {
		err := h.gw.Reload(c.set)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s: err = %v, want %q", c.name, err, c.want)
		}
		if r := h.do(callSpec{tool: "reload-echo", session: "s", step: 9, token: "beta-token"}); r.status != 200 {
			t.Fatalf("%s: a refused reload changed the tenants: %d", c.name, r.status)
		}
	}
}
