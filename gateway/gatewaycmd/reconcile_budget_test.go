package gatewaycmd

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestReconcileSettlesABudget: two refunds of 60 charge a budget of 200
// and end UNKNOWN (the upstream answers after the timeout). The owner
// says the first was paid and the second was not: reconciliation commits
// the first (budget_committed 60 after its resolved receipt) and
// releases the second (budget_released 60), as the upstream counted
// them, and the receipts name the budget, the amount and each call's
// execution.
// On every store, Redis Cluster included.
func TestReconcileSettlesABudget(t *testing.T) {
	for name, storeSection := range killTestStores("recbudget") {
		t.Run(name, func(t *testing.T) {
			reconcileSettlesABudget(t, strings.TrimPrefix(storeSection(t), "store:\n"))
		})
	}
}

// reconcileSettlesABudget is TestReconcileSettlesABudget on the store
// whose section (under store:) is store.
func reconcileSettlesABudget(t *testing.T, store string) {
	var paid atomic.Int64 // what the upstream paid out
	mux := http.NewServeMux()
	mux.HandleFunc("/refund", func(w http.ResponseWriter, r *http.Request) {
		var args struct {
			Amount int64  `json:"amount"`
			Txn    string `json:"txn"`
		}
		_ = json.NewDecoder(r.Body).Decode(&args)
		if args.Txn == "paid" {
			paid.Add(args.Amount)
		}
		select { // past the tool's timeout: the gateway cannot tell
		case <-time.After(time.Second):
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusCreated)
	})
	mux.HandleFunc("/status", func(w http.ResponseWriter, r *http.Request) {
		var q struct {
			Arguments struct {
				Txn string `json:"txn"`
			} `json:"arguments"`
		}
		if err := json.NewDecoder(r.Body).Decode(&q); err != nil {
			http.Error(w, "bad question", http.StatusBadRequest)
			return
		}
		if q.Arguments.Txn == "paid" {
			_, _ = io.WriteString(w, `{"outcome":"committed","status":201,"body":{"refund":"r_1"}}`)
			return
		}
		_, _ = io.WriteString(w, `{"outcome":"not_committed"}`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	config, adminToken := reconcileConfig(strings.TrimSuffix(store, "\n"), srv.URL+"/refund", srv.URL+"/status")
	config = strings.Replace(config, "    lease_expiry: unknown\n",
		"    lease_expiry: unknown\n    charges:\n      - budget: refunds\n        cost: \"args.amount\"\n", 1) +
		"budgets:\n  - {name: refunds, limit: 200, window: {calendar: day}, scope: tenant}\n"
	g := startGateway(t, config)

	for _, c := range []struct{ session, args string }{{"s1", `{"txn":"paid","amount":60}`}, {"s2", `{"txn":"unpaid","amount":60}`}} {
		resp := call(t, g.addr, c.session, 1, "refund", c.args)
		resp.Body.Close()
		if resp.StatusCode < 500 {
			t.Fatalf("%s answered %d; want the timeout's uncertain outcome", c.args, resp.StatusCode)
		}
	}
	var budget []string
	executions := map[string]string{} // execution id → the first event naming it
	waitFor(t, func() bool {
		req, _ := http.NewRequest(http.MethodGet, "http://"+g.addr+"/admin/v1/receipts?tenant=anonymous", nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		budget = budget[:0]
		lines := bufio.NewScanner(resp.Body)
		for lines.Scan() {
			var r struct {
				Event, Budget, Amount, By string
				ExecutionID               string `json:"execution_id"`
			}
			if err := json.Unmarshal(lines.Bytes(), &r); err != nil {
				t.Fatalf("receipt %s: %v", lines.Text(), err)
			}
			if strings.HasPrefix(r.Event, "budget_") || r.Event == "resolved" {
				budget = append(budget, r.Event+" "+r.Budget+" "+r.Amount+" "+r.By)
				if executions[r.ExecutionID] == "" {
					executions[r.ExecutionID] = r.Event
				}
				if r.ExecutionID == "" {
					t.Fatalf("a receipt without its execution: %s", lines.Text())
				}
			}
		}
		return slices.Contains(budget, "budget_committed refunds 60 ") && slices.Contains(budget, "budget_released refunds 60 ")
	})
	// Each call: reserved, then (reconciled) resolved and its settlement.
	if reserved := len(slices.DeleteFunc(slices.Clone(budget), func(r string) bool { return r != "budget_reserved refunds 60 " })); reserved != 2 {
		t.Fatalf("budget receipts %q: want both reservations", budget)
	}
	committed, released := slices.Index(budget, "budget_committed refunds 60 "), slices.Index(budget, "budget_released refunds 60 ")
	resolved := func(before int) bool { return slices.Contains(budget[:before], "resolved   reconcile") }
	if !resolved(committed) || !resolved(released) || len(budget) != 6 || len(executions) != 2 {
		t.Fatalf("receipts %q: want each call's reservation, its resolved by reconcile and then its settlement", budget)
	}
	if paid.Load() != 60 {
		t.Fatalf("the upstream paid %d", paid.Load())
	}
}
