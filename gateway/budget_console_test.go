package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// TestConsoleBudgetCard: the console's Budgets page shows a card per
// budget window with what the store holds — 40 used by a completed
// refund, 60 held by an UNKNOWN one, 0 remaining of 100, and when the
// window resets.
func TestConsoleBudgetCard(t *testing.T) {
	tool := refundLosingAnswerOf(`{"amount":60}`)
	h := newHarness(t, storeEmbedded, []tools.Tool{tool}, withBudgets(refundBudget(t, 100)), withAdmin("adm"),
		withPolicy("refund", tools.Policy{LeaseExpiry: idempotency.LeaseExpiryUnknown}))
	if r := h.do(callSpec{tool: "refund", session: "a", step: 1, args: `{"amount":40}`}); r.status != http.StatusOK {
		t.Fatalf("40: %d %s", r.status, r.body)
	}
	wantProblem(t, h.do(callSpec{tool: "refund", session: "b", step: 1, args: `{"amount":60}`}), http.StatusBadGateway, wire.CodeUpstreamUnreachable)
	c, _ := consoleBrowser(t, h, "adm")
	page := consoleGet(t, c, h.Srv.URL+"/console/budgets")
	for _, want := range []string{`aria-label="budget refunds-daily"`, "<dt>Used</dt><dd>40 of 100</dd>", "<dt>Held</dt><dd>60 ",
		"<dt>Remaining</dt><dd>0</dd>", "resets at 20"} {
		if !strings.Contains(page, want) {
			t.Fatalf("the Budgets page lacks %q:\n%s", want, page)
		}
	}
}
