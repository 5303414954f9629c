package gateway_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/gatewaytest"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
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

// TestBudgetSettlementReceipts: a refund of 60 whose outcome is UNKNOWN
// (the upstream paid, its answer was lost) and that the operator resolves
// as executed leaves budget_committed 60 after its resolved receipt; one
// the operator deletes ("it did not happen") leaves budget_released 60
// after its deleted receipt. A replay of the resolved call, and the
// resolve and delete of an UNKNOWN call of a tool that charges no budget,
// leave no budget receipt. The chain still verifies. On every store.
func TestBudgetSettlementReceipts(t *testing.T) {
	gatewaytest.ForEachStore(t, func(t *testing.T, kind storeKind) {
		budgetSettlementReceipts(t, kind, newStore(t, kind))
	})
}

// budgetSettlementReceipts is TestBudgetSettlementReceipts on store (of kind).
func budgetSettlementReceipts(t *testing.T, kind storeKind, store idempotency.Store) {
	refund, paid := refundTool()
	pay := refund.behave
	refund.behave = func(ctx context.Context, req *tools.Request) (*tools.Response, error) {
		_, _ = pay(ctx, req)
		return nil, fmt.Errorf("connection reset: %w", tools.ErrOutcomeUncertain)
	}
	var noted atomic.Int64
	note := newTestTool("note") // charges no budget
	note.behave = func(context.Context, *tools.Request) (*tools.Response, error) {
		noted.Add(1)
		return nil, fmt.Errorf("connection reset: %w", tools.ErrOutcomeUncertain)
	}
	rs := receiptsBeside(t, store)
	unknown := tools.Policy{LeaseExpiry: idempotency.LeaseExpiryUnknown}
	h := newHarness(t, kind, []tools.Tool{refund, note}, withStore(store), withBudgets(refundBudget(t, 200)), withAdmin("adm"),
		withPolicy("refund", unknown), withPolicy("note", unknown), func(o *callpath.Options) { o.Receipts = rs })
	uncertain := func(tool, session, args string) string {
		t.Helper()
		wantProblem(t, h.do(callSpec{tool: tool, session: session, step: 1, args: args}), http.StatusBadGateway, wire.CodeUpstreamUnreachable)
		return "/admin/v1/records/anonymous/" + tool + "/" + derivedKey(t, session, 1, tool, args)
	}
	resolve := func(path string) {
		t.Helper()
		if r := adminPost(t, h, path+"/resolve", "adm", `{"status":200,"body":{"refunded":60}}`); r.status != http.StatusOK {
			t.Fatalf("resolve: %d %s", r.status, r.body)
		}
	}
	remove := func(path string) {
		t.Helper()
		if r := h.send(http.MethodDelete, path, "adm"); r.status != http.StatusNoContent {
			t.Fatalf("delete: %d %s", r.status, r.body)
		}
	}

	resolve(uncertain("refund", "resolved", `{"amount":60}`))
	if r := h.do(callSpec{tool: "refund", session: "resolved", step: 1, args: `{"amount":60}`}); r.status != http.StatusOK || r.header.Get(wire.HeaderReplayed) != "true" {
		t.Fatalf("replay of the resolved refund: %d %s", r.status, r.body)
	}
	remove(uncertain("refund", "deleted", `{"amount":60}`))
	resolve(uncertain("note", "note-resolved", `{"text":"a"}`))
	remove(uncertain("note", "note-deleted", `{"text":"b"}`))
	if paid.Load() != 2*60*100 || noted.Load() != 2 {
		t.Fatalf("the upstreams ran: refund paid %d cents, note %d times", paid.Load(), noted.Load())
	}

	// The receipt writer keeps the order it was given: the note's
	// deletion, the last action, is the last receipt.
	var chain []receipts.Receipt
	gatewaytest.Eventually(t, 10*time.Second, "the last deletion's receipt", func() bool {
		chain = chainOf(t, rs, callpath.AnonymousTenant, 1)
		last := chain[len(chain)-1]
		return last.Event == receipts.EventDeleted && last.Tool == "note"
	})
	var got []string
	for _, r := range chain {
		switch {
		case r.Budget != "":
			got = append(got, fmt.Sprintf("%s %s %s", r.Event, r.Budget, r.Amount))
			if r.Tool != "refund" || r.Key == "" || r.Session == "" || r.ExecutionID == "" {
				t.Errorf("budget receipt without its call: %+v", r)
			}
		case r.Event == receipts.EventResolved || r.Event == receipts.EventDeleted:
			got = append(got, fmt.Sprintf("%s %s", r.Event, r.Tool))
			// The admin API's deletion names the execution it removed, as
			// its resolution (and the console's actions) do.
			if r.ExecutionID == "" || r.Session == "" {
				t.Errorf("%s receipt without the execution it settled: %+v", r.Event, r)
			}
		}
	}
	want := "budget_reserved refunds-daily 60, resolved refund, budget_committed refunds-daily 60, " +
		"budget_reserved refunds-daily 60, deleted refund, budget_released refunds-daily 60, resolved note, deleted note"
	if strings.Join(got, ", ") != want {
		t.Fatalf("receipts %q,\nwant %q", strings.Join(got, ", "), want)
	}
	var export bytes.Buffer
	if err := receipts.Export(context.Background(), rs, &export); err != nil {
		t.Fatal(err)
	}
	if report, err := receipts.Verify(&export); err != nil || !report.OK() || report.Tenants[0].Checked != len(chain) {
		t.Fatalf("verify: %v %+v", err, report)
	}
}
