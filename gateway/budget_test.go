package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/budgets"
	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/decide"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
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
	return func(o *callpath.Options) { o.Budgets = set }
}

// TestBudgetRaceAcrossReplicas: 64 refunds from 3 gateway replicas on one
// store race for a budget of 1 000. What reached the upstream sums to at
// most the limit, every refused call got budget_exceeded (with the budget,
// what remains of it, and when it resets), and the remaining the store
// reports is the limit minus what was paid.
func TestBudgetRaceAcrossReplicas(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) { budgetRace(t, kind, newStore(t, kind)) })
}

// budgetRace is TestBudgetRaceAcrossReplicas on store (of kind).
func budgetRace(t *testing.T, kind storeKind, store idempotency.Store) {
	tool, paid := refundTool()
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
}

// TestBudgetSettles: a refund's reservation follows its record. An
// UNKNOWN refund (its upstream may have paid) stays held, so a refund
// that would need its amount is refused; the operator's delete (it did
// not pay) releases it, and the same refund then runs; a refund the
// upstream proved it did not execute releases its amount at once; an
// UNKNOWN refund resolved as executed stays counted; a replay charges
// nothing. Counted at the upstream: what it paid never exceeds the limit.
func TestBudgetSettles(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) { budgetSettles(t, kind) })
}

// budgetSettles is TestBudgetSettles on a store of kind (opts may give
// the store).
func budgetSettles(t *testing.T, kind storeKind, opts ...harnessOption) {
	tool, paid := refundTool()
	pay := tool.behave
	tool.behave = func(ctx context.Context, req *tools.Request) (*tools.Response, error) {
		switch string(req.Arguments) {
		case `{"amount":60,"note":"lost"}`, `{"amount":30,"note":"lost"}`: // it paid, the answer was lost
			_, _ = pay(ctx, req)
			return nil, fmt.Errorf("connection reset: %w", tools.ErrOutcomeUncertain)
		case `{"amount":40,"note":"refused"}`: // the upstream refused it: nothing paid
			return nil, fmt.Errorf("invalid params: %w", errors.Join(tools.ErrUpstreamRejected, tools.ErrNotExecuted))
		}
		return pay(ctx, req)
	}
	h := newHarness(t, kind, []tools.Tool{tool}, append([]harnessOption{withBudgets(refundBudget(t, 100)), withAdmin("adm"),
		withPolicy("refund", tools.Policy{LeaseExpiry: idempotency.LeaseExpiryUnknown})}, opts...)...)
	refund := func(session, args string) response {
		return h.do(callSpec{tool: "refund", session: session, step: 1, args: args})
	}
	exceeded := func(r response, remaining float64) {
		t.Helper()
		p := wantContractProblem(t, r, http.StatusForbidden, wire.CodeBudgetExceeded, false)
		if p["remaining"] != remaining {
			t.Fatalf("remaining %v, want %v", p["remaining"], remaining)
		}
	}

	// 60 paid, answer lost: UNKNOWN, held.
	wantProblem(t, refund("lost", `{"amount":60,"note":"lost"}`), http.StatusBadGateway, wire.CodeUpstreamUnreachable)
	wantProblem(t, refund("lost", `{"amount":60,"note":"lost"}`), http.StatusConflict, wire.CodeOutcomeUnknown)
	exceeded(refund("a", `{"amount":50}`), 40)
	// The upstream refuses 40: released at once, so 40 still remains.
	wantProblem(t, refund("refused", `{"amount":40,"note":"refused"}`), http.StatusBadGateway, wire.CodeUpstreamUnreachable)
	exceeded(refund("b", `{"amount":41}`), 40)
	if r := refund("c", `{"amount":40}`); r.status != http.StatusOK {
		t.Fatalf("40 of the 40 left: %d %s", r.status, r.body)
	}
	// A replay charges nothing.
	if r := refund("c", `{"amount":40}`); r.status != http.StatusOK || r.header.Get(wire.HeaderReplayed) != "true" {
		t.Fatalf("replay: %d %v", r.status, r.header)
	}
	exceeded(refund("d", `{"amount":1}`), 0)
	wantUsage := func(used, held float64) {
		t.Helper()
		r := h.get("/admin/v1/budgets?tenant="+callpath.AnonymousTenant, "adm")
		var body struct {
			Budgets []map[string]any `json:"budgets"`
		}
		if err := json.Unmarshal(r.body, &body); err != nil || r.status != http.StatusOK || len(body.Budgets) != 1 {
			t.Fatalf("GET /admin/v1/budgets: %d %s", r.status, r.body)
		}
		b := body.Budgets[0]
		if b["budget"] != "refunds-daily" || b["limit"] != 100.0 || b["used"] != used || b["held"] != held || b["remaining"] != 100-used-held || b["resets_at"] == nil {
			t.Fatalf("budget usage %v, want used %v held %v", b, used, held)
		}
	}
	wantUsage(40, 60) // the UNKNOWN 60 held, the completed 40 used

	// The operator finds the 60 was not paid after all (in this story)
	// and deletes the record: its 60 is released.
	key := derivedKey(t, "lost", 1, "refund", `{"amount":60,"note":"lost"}`)
	if r := h.send(http.MethodDelete, "/admin/v1/records/anonymous/refund/"+key, "adm"); r.status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	// 30 paid with the answer lost, resolved by the operator as
	// executed: it stays counted.
	wantProblem(t, refund("lost30", `{"amount":30,"note":"lost"}`), http.StatusBadGateway, wire.CodeUpstreamUnreachable)
	key30 := derivedKey(t, "lost30", 1, "refund", `{"amount":30,"note":"lost"}`)
	if r := adminPost(t, h, "/admin/v1/records/anonymous/refund/"+key30+"/resolve", "adm", `{"status":200,"body":{"refunded":30}}`); r.status != http.StatusOK {
		t.Fatalf("resolve: %d %s", r.status, r.body)
	}
	exceeded(refund("e", `{"amount":31}`), 30)
	if r := refund("f", `{"amount":30}`); r.status != http.StatusOK {
		t.Fatalf("30 of the 30 left: %d %s", r.status, r.body)
	}
	wantUsage(100, 0)
	if r := h.get("/admin/v1/budgets", "adm"); r.status != http.StatusBadRequest {
		t.Fatalf("without a tenant: %d %s", r.status, r.body)
	}
	// Paid: 60 (lost, deleted: the story's operator was wrong about
	// the upstream, which this test's upstream counts honestly), 40,
	// 30, 30. The budget saw 40 + 30 + 30 = 100.
	if got := paid.Load(); got != (60+40+30+30)*100 {
		t.Fatalf("the upstream paid %d cents", got)
	}
}

// TestBudgetWindowRollover: claims of two windows race on one store —
// the calendar day about to end and the next one, and a rolling window
// whose start moves on — each window lets exactly its limit through (10
// claims of 10 against 100), so no claim is counted in both windows; a
// claim repeated by its owner in the next window is not charged again.
func TestBudgetWindowRollover(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		budgetWindowRollover(t, newStore(t, kind))
	})
}

// budgetWindowRollover is TestBudgetWindowRollover on store.
func budgetWindowRollover(t *testing.T, store idempotency.Store) {
	ctx := context.Background()
	day1 := time.Date(2026, 12, 7, 23, 59, 59, 0, time.UTC)
	day2 := day1.Add(2 * time.Second)
	charge := func(bucket string, at, since time.Time, rolling bool) []idempotency.Charge {
		return []idempotency.Charge{{Bucket: bucket, Budget: "b", Limit: 100 * budgets.Unit, Cost: 10 * budgets.Unit,
			At: at, Since: since, Retain: 48 * time.Hour, Rolling: rolling}}
	}
	windows := map[string][]idempotency.Charge{
		"day1":     charge("b|t:x|w:2026-12-07T00", day1, day1.Truncate(24*time.Hour), false),
		"day2":     charge("b|t:x|w:2026-12-08T00", day2, day2.Truncate(24*time.Hour), false),
		"rolling1": charge("r|t:x", day1, day1.Add(-time.Hour), true),
		// An hour later: the first window's reservations are older than its start.
		"rolling2": charge("r|t:x", day1.Add(time.Hour+time.Second), day1.Add(time.Second), true),
	}
	claimed := map[string]*atomic.Int64{}
	var wg sync.WaitGroup
	race := func(names ...string) {
		for _, name := range names {
			charges := windows[name]
			// The goroutines count into their window's counter, never
			// through the map the next window's entry is written into.
			counter := &atomic.Int64{}
			claimed[name] = counter
			for i := range 24 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					d, err := store.Claim(ctx, idempotency.ClaimRequest{
						Scope:       idempotency.Scope{Tenant: "x", Tool: "refund", Key: fmt.Sprintf("%s-%d", name, i)},
						Fingerprint: "fp", ExecutionID: fmt.Sprintf("e-%s-%d", name, i), Owner: fmt.Sprintf("o-%s-%d", name, i),
						LockTTL: time.Minute, ReplayTTL: time.Hour, Charges: charges,
					})
					switch {
					case err != nil:
						t.Errorf("%s %d: %v", name, i, err)
					case d.Outcome == idempotency.OutcomeClaimed:
						counter.Add(1)
					case d.Outcome != idempotency.OutcomeBudgetExceeded:
						t.Errorf("%s %d: %v", name, i, d.Outcome)
					}
				}()
			}
		}
		wg.Wait()
	}
	// The two days race each other; a rolling window's claims are
	// made at their time, the later window's after the earlier's (a
	// claim counts every reservation from its window's start on, a
	// later one included: never less than is spent).
	race("day1", "day2", "rolling1")
	race("rolling2")
	for name, n := range claimed {
		if n.Load() != 10 {
			t.Errorf("window %s let %d claims of 10 through against 100, want 10", name, n.Load())
		}
	}
	// A claim of day 1 sent again by its owner on day 2 (its caller
	// lost the answer) is its own claim: day 2 is full, and it is not
	// charged there.
	for i := range 24 {
		d, err := store.Claim(ctx, idempotency.ClaimRequest{
			Scope:       idempotency.Scope{Tenant: "x", Tool: "refund", Key: fmt.Sprintf("day1-%d", i)},
			Fingerprint: "fp", ExecutionID: "again", Owner: fmt.Sprintf("o-day1-%d", i),
			LockTTL: time.Minute, ReplayTTL: time.Hour, Charges: windows["day2"],
		})
		if err != nil {
			t.Fatal(err)
		}
		if d.Outcome == idempotency.OutcomeClaimed {
			if d.Lease.ExecutionID != fmt.Sprintf("e-day1-%d", i) {
				t.Fatalf("day 1's claim %d taken again as %s", i, d.Lease.ExecutionID)
			}
			return
		}
	}
	t.Fatal("no claim of day 1 was found again")
}

// TestBudgetRuleAsksFinance: "over the daily limit → ask finance" is one
// decide rule on budget["refunds-daily"].would_exceed. Under the limit
// the refund runs; one that would go over waits for an operator; once
// approved it runs and is charged over the limit (remaining -30, as the
// admin API reports); the next refund then needs an approval too.
// Counted at the upstream, on every store.
func TestBudgetRuleAsksFinance(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		tool, paid := refundTool()
		rules := compileRules(t, "refund", []decide.Rule{
			{When: `budget["refunds-daily"].would_exceed == true`, Decision: decide.Approve, Reason: "over the daily limit: finance decides"},
			{Decision: decide.Allow},
		})
		h := newHarness(t, kind, []tools.Tool{tool}, withBudgets(refundBudget(t, 100)), withAdmin("adm"),
			withDecisions(rules, decide.ModeEnforce, callpath.ApprovalSettings{}))
		if r := h.do(callSpec{tool: "refund", session: "s", step: 1, args: `{"amount":80}`}); r.status != http.StatusOK {
			t.Fatalf("80 of 100: %d %s", r.status, r.body)
		}
		over := callSpec{tool: "refund", session: "s", step: 2, args: `{"amount":50}`}
		p := wantProblem(t, h.do(over), http.StatusConflict, wire.CodeApprovalPending)
		id, _ := p["approval_id"].(string)
		if r := h.postJSON("/admin/v1/approvals/"+id+"/approve", "adm", "application/json", `{"by":"finance"}`); r.status != http.StatusOK {
			t.Fatalf("approve: %d %s", r.status, r.body)
		}
		if r := h.do(over); r.status != http.StatusOK {
			t.Fatalf("the approved 50: %d %s", r.status, r.body)
		}
		if got := paid.Load(); got != 130*100 {
			t.Fatalf("the upstream paid %d cents, want 130.00 (80, and 50 approved over the limit)", got)
		}
		r := h.get("/admin/v1/budgets?tenant="+callpath.AnonymousTenant, "adm")
		if !strings.Contains(string(r.body), `"used":130`) || !strings.Contains(string(r.body), `"remaining":-30`) {
			t.Fatalf("budget after the approved call: %s", r.body)
		}
		wantProblem(t, h.do(callSpec{tool: "refund", session: "s", step: 3, args: `{"amount":1}`}), http.StatusConflict, wire.CodeApprovalPending)
	})
}
