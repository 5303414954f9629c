package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/budgets"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// refundTool is a refund whose upstream sums the amounts it paid out: the
// side effect a budget limits, counted where it happens.
func refundTool() (*testTool, *atomic.Int64) {
	var paidCents atomic.Int64
	tool := newTestTool("refund")
	tool.behave = func(_ context.Context, req *tools.Request) (*tools.Response, error) {
		var args struct {
			Amount float64 `json:"amount"`
		}
		if err := json.Unmarshal(req.Arguments, &args); err != nil {
			return nil, err
		}
		paidCents.Add(int64(args.Amount * 100))
		return tools.JSON(200, map[string]any{"refunded": args.Amount})
	}
	return tool, &paidCents
}

// refundBudget is a daily budget of limit charged by refund's amount.
func refundBudget(t testing.TB, limit float64) *budgets.Set {
	t.Helper()
	set, err := budgets.New([]budgets.Budget{{Name: "refunds-daily", Limit: limit, Scope: budgets.ScopeTenant,
		Window: budgets.Window{Calendar: "day", TimeZone: "Europe/Berlin"}}},
		map[string][]budgets.Charge{"refund": {{Budget: "refunds-daily", Cost: "args.amount"}}})
	if err != nil {
		t.Fatalf("budgets: %v", err)
	}
	return set
}

func withBudgets(set *budgets.Set) harnessOption {
	return func(o *gateway.Options) { o.Budgets = set }
}

// TestBudgetRaceAcrossReplicas: 64 refunds from 3 gateway replicas on one
// store race for a budget of 1 000. What reached the upstream sums to at
// most the limit, every refused call got budget_exceeded (with the budget,
// what remains of it, and when it resets), and the remaining the store
// reports is the limit minus what was paid.
func TestBudgetRaceAcrossReplicas(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		tool, paid := refundTool()
		store := newStore(t, kind)
		set := refundBudget(t, 1000)
		var replicas []*harness
		for range 3 {
			replicas = append(replicas, newHarness(t, kind, []tools.Tool{tool}, withStore(store), withBudgets(set)))
		}
		const calls = 64
		var (
			wg                sync.WaitGroup
			mu                sync.Mutex
			executed, refused int
			requestedCents    int64
			minRemaining      = 1e18
		)
		for i := range calls {
			amount := 20 + (i*37)%71 // 20 … 90: about 3 500 asked in all
			requestedCents += int64(amount) * 100
			wg.Add(1)
			go func() {
				defer wg.Done()
				h := replicas[i%len(replicas)]
				r, err := h.try(callSpec{tool: "refund", session: fmt.Sprintf("race-%d", i), step: 1, args: fmt.Sprintf(`{"amount":%d}`, amount)})
				if err != nil {
					t.Errorf("call %d: %v", i, err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				switch r.status {
				case http.StatusOK:
					executed++
				case http.StatusForbidden:
					p := r.problem(t)
					if p["code"] != wire.CodeBudgetExceeded || p["budget"] != "refunds-daily" || p["retryable"] != false || p["resets_at"] == nil {
						t.Errorf("call %d: refusal %v", i, p)
					}
					remaining, _ := p["remaining"].(float64)
					if remaining < 0 || remaining >= float64(amount) {
						t.Errorf("call %d of %d refused with %v remaining", i, amount, remaining)
					}
					minRemaining = min(minRemaining, remaining)
					refused++
				default:
					t.Errorf("call %d: %d %s", i, r.status, r.body)
				}
			}()
		}
		wg.Wait()
		if got := paid.Load(); got > 1000*100 {
			t.Fatalf("the upstream paid %d.%02d, over the limit of 1000", got/100, got%100)
		}
		if executed+refused != calls || refused == 0 || executed == 0 {
			t.Fatalf("%d executed, %d refused of %d (asked %d in all)", executed, refused, calls, requestedCents/100)
		}
		if got := int(tool.total.Load()); got != executed {
			t.Fatalf("the upstream ran %d times, %d calls answered 200", got, executed)
		}
		// Nothing leaked: what is left after the race is the limit
		// minus what the upstream paid.
		if left := 1000 - float64(paid.Load())/100; minRemaining < left {
			t.Fatalf("a refusal said %v remained, but %v is left after paying %d", minRemaining, left, paid.Load()/100)
		}
		t.Logf("%s: %d executed (paid %d), %d refused", kind, executed, paid.Load()/100, refused)
	})
}
