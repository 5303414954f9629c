package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// TestBudgetGauges: gateway_budget_used, _held and _remaining follow the
// store. 40 paid and a refund of 60 whose answer was lost (UNKNOWN) show
// used 40, held 60, remaining 0 on the replica that charged them, and on
// a second replica of the same store that charged nothing (it finds the
// tenant through the UNKNOWN record). On every store.
func TestBudgetGauges(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		tool := refundLosingAnswerOf(`{"amount":60}`)
		store := newStore(t, kind)
		sampled := func(o *callpath.Options) { o.RecordsSampleInterval = 50 * time.Millisecond }
		replica := func() *harness {
			return newHarness(t, kind, []tools.Tool{tool}, withStore(store), withBudgets(refundBudget(t, 100)), withAdmin("adm"), sampled,
				withPolicy("refund", tools.Policy{LeaseExpiry: idempotency.LeaseExpiryUnknown}))
		}
		h := replica()
		if r := h.do(callSpec{tool: "refund", session: "a", step: 1, args: `{"amount":40}`}); r.status != http.StatusOK {
			t.Fatalf("40: %d %s", r.status, r.body)
		}
		wantProblem(t, h.do(callSpec{tool: "refund", session: "b", step: 1, args: `{"amount":60}`}), http.StatusBadGateway, wire.CodeUpstreamUnreachable)
		for i, r := range []*harness{h, replica()} {
			eventually(t, 5*time.Second, "the budget gauges", func() bool {
				return budgetGauge(r, "gateway_budget_used") == 40 && budgetGauge(r, "gateway_budget_held") == 60 &&
					budgetGauge(r, "gateway_budget_remaining") == 0
			})
			t.Logf("replica %d: used 40, held 60, remaining 0", i+1)
		}
	})
}

// refundLosingAnswerOf is refundTool whose call with args pays and then
// loses its answer (the connection reset): its outcome is UNKNOWN.
func refundLosingAnswerOf(args string) *testTool {
	tool, _ := refundTool()
	pay := tool.behave
	tool.behave = func(ctx context.Context, req *tools.Request) (*tools.Response, error) {
		if string(req.Arguments) == args {
			_, _ = pay(ctx, req)
			return nil, fmt.Errorf("connection reset: %w", tools.ErrOutcomeUncertain)
		}
		return pay(ctx, req)
	}
	return tool
}

// budgetGauge is the value of the budget gauge name for refunds-daily
// (-1 when it has no such series).
func budgetGauge(h *harness, name string) float64 {
	h.t.Helper()
	families, err := h.reg.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if f.GetName() == name && len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == "refunds-daily" {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}
