package gateway_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/gatewaytest"
	"github.com/toolgateway/toolgateway/gateway/receipts"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// TestBudgetReceipts: a refund of 60 that runs leaves budget_reserved and
// budget_committed for 60 of refunds-daily; one of 40 the upstream
// refused as not executed leaves budget_reserved and budget_released; one
// over the budget leaves none (nothing reserved). The chain still
// verifies. On every store.
func TestBudgetReceipts(t *testing.T) {
	gatewaytest.ForEachStore(t, func(t *testing.T, kind storeKind) {
		tool, paid := refundTool()
		pay := tool.behave
		tool.behave = func(ctx context.Context, req *tools.Request) (*tools.Response, error) {
			if string(req.Arguments) == `{"amount":40}` { // the upstream refused it: nothing paid
				return nil, fmt.Errorf("invalid params: %w", errors.Join(tools.ErrUpstreamRejected, tools.ErrNotExecuted))
			}
			return pay(ctx, req)
		}
		store := newStore(t, kind)
		rs := receiptsBeside(t, store)
		h := newHarness(t, kind, []tools.Tool{tool}, withStore(store), withBudgets(refundBudget(t, 100)),
			func(o *callpath.Options) { o.Receipts = rs })
		if r := h.do(callSpec{tool: "refund", session: "a", step: 1, args: `{"amount":60}`}); r.status != http.StatusOK {
			t.Fatalf("60: %d %s", r.status, r.body)
		}
		wantProblem(t, h.do(callSpec{tool: "refund", session: "b", step: 1, args: `{"amount":40}`}), http.StatusBadGateway, wire.CodeUpstreamUnreachable)
		wantProblem(t, h.do(callSpec{tool: "refund", session: "c", step: 1, args: `{"amount":50}`}), http.StatusForbidden, wire.CodeBudgetExceeded)
		chain := chainOf(t, rs, callpath.AnonymousTenant, 6) // and two executed
		var got []string
		for _, r := range chain {
			if r.Budget != "" {
				got = append(got, fmt.Sprintf("%s %s %s", r.Event, r.Budget, r.Amount))
				if r.Tool != "refund" || r.Key == "" || r.ExecutionID == "" || r.Session == "" {
					t.Errorf("budget receipt without its call: %+v", r)
				}
			}
		}
		want := "budget_reserved refunds-daily 60, budget_committed refunds-daily 60, budget_reserved refunds-daily 40, budget_released refunds-daily 40"
		if strings.Join(got, ", ") != want {
			t.Fatalf("budget receipts %q, want %q", strings.Join(got, ", "), want)
		}
		if paid.Load() != 60*100 {
			t.Fatalf("the upstream paid %d cents", paid.Load())
		}
		var export bytes.Buffer
		if err := receipts.Export(context.Background(), rs, &export); err != nil {
			t.Fatal(err)
		}
		if report, err := receipts.Verify(&export); err != nil || !report.OK() || report.Tenants[0].Checked != len(chain) {
			t.Fatalf("verify: %v %+v", err, report)
		}
	})
}
