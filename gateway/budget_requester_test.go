package gateway_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/budgets"
	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/gatewaytest"
	"github.com/toolgateway/toolgateway/gateway/oidcauth"
	"github.com/toolgateway/toolgateway/internal/oidctest"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// TestBudgetPerRequester: a budget scoped by requester keeps one sum per
// principal of a tenant. The tenant's static token (token:acme) and a
// person signed in through the tenant's identity provider each get their
// own 100: each is paid 80, each is then refused 30 with 20 remaining,
// and the admin API reports each principal's window apart. Counted at the
// upstream: 160 paid.
func TestBudgetPerRequester(t *testing.T) {
	const audience = "http://gateway.test/mcp"
	op := oidctest.Start(t, audience)
	verifier, err := oidcauth.New(oidcauth.Config{Issuer: op.Issuer, Audience: audience, Tenant: "acme"}, oidcauth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	set, err := budgets.New([]budgets.Budget{{Name: "per-person", Limit: 100, Scope: budgets.ScopeRequester, Window: budgets.Window{Calendar: "day"}}},
		map[string][]budgets.Charge{"refund": {{Budget: "per-person", Cost: "args.amount"}}})
	if err != nil {
		t.Fatal(err)
	}
	tool, paid := refundTool()
	h := gatewaytest.New(t, gatewaytest.Embedded, []tools.Tool{tool}, withBudgets(set),
		gatewaytest.WithTenants(map[string]string{"acme": acmeToken}), withAdmin(adminToken),
		func(o *callpath.Options) { o.OIDC = verifier })
	person := op.Token(t)
	refund := func(token, session, amount string) gatewaytest.Response {
		return h.Do(gatewaytest.Call{Tool: "refund", Session: session, Step: 1, Args: `{"amount":` + amount + `}`, Token: token})
	}
	for _, token := range []string{acmeToken, person} {
		if r := refund(token, "first-"+token[:4], "80"); r.Status != http.StatusOK {
			t.Fatalf("80 of its own 100: %d %s", r.Status, r.Body)
		}
	}
	for _, token := range []string{acmeToken, person} {
		r := refund(token, "second-"+token[:4], "30")
		p := gatewaytest.WantProblem(t, r, http.StatusForbidden, wire.CodeBudgetExceeded)
		if p["remaining"] != 20.0 {
			t.Fatalf("30 over its own 20 left: %s", r.Body)
		}
	}
	if got := paid.Load(); got != 160*100 {
		t.Fatalf("the upstream paid %d cents, want 160 00", got)
	}
	r := h.Send(http.MethodGet, "/admin/v1/budgets?"+url.Values{"tenant": {"acme"}, "requester": {"token:acme"}}.Encode(), adminToken)
	var body struct{ Budgets []gateway.AdminBudget }
	if err := json.Unmarshal(r.Body, &body); err != nil || r.Status != http.StatusOK || len(body.Budgets) != 1 {
		t.Fatalf("GET /admin/v1/budgets: %d %s", r.Status, r.Body)
	}
	if b := body.Budgets[0]; b.Requester != "token:acme" || b.Used != 80 || b.Remaining != 20 {
		t.Fatalf("token:acme's window: %+v", b)
	}
}
