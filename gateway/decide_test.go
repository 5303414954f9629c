package gateway_test

// The decide stage on every store: deny, approve (bound to the exact
// call, single use, expiring, denied for good), a rule changed by a
// reload between approval and use, Prefer: wait for a decision, observe
// mode, new pending approvals notified once. Executions are counted at
// the tool.

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/decide"
	"github.com/toolgateway/toolgateway/gateway/gatewaytest"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/redisstore"
	"github.com/toolgateway/toolgateway/gateway/notify"
	"github.com/toolgateway/toolgateway/internal/redistest"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// refundRules: small refunds run, larger ones need an operator, the
// largest are refused.
var refundRules = []decide.Rule{
	{When: "args.amount <= 100", Decision: decide.Allow},
	{When: "args.amount <= 10000", Decision: decide.Approve, Reason: "refunds above 100 need finance"},
	{Decision: decide.Deny, Reason: "refunds above 10 000 are not an agent's call"},
}

// compileRules compiles rules for tool or fails the test.
func compileRules(t testing.TB, tool string, rules []decide.Rule) map[string]*decide.Policy {
	t.Helper()
	p, err := decide.Compile(tool, rules)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]*decide.Policy{tool: p}
}

// withDecisions configures the decide rules, mode and approval windows.
func withDecisions(d map[string]*decide.Policy, mode decide.Mode, a callpath.ApprovalSettings) gatewaytest.Option {
	return func(o *callpath.Options) { o.Decisions, o.Mode, o.Approvals = d, mode, a }
}

// decideHarness serves a counting "refund" tool with refundRules.
func decideHarness(t *testing.T, kind storeKind, a callpath.ApprovalSettings, opts ...gatewaytest.Option) (*gatewaytest.Harness, *gatewaytest.Tool) {
	tool := gatewaytest.NewTool("refund")
	opts = append([]gatewaytest.Option{withDecisions(compileRules(t, "refund", refundRules), decide.ModeEnforce, a)}, opts...)
	return gatewaytest.New(t, kind, []tools.Tool{tool}, opts...), tool
}

// refund is the call of a refund of amount at step.
func refund(session string, step uint64, amount string) gatewaytest.Call {
	return gatewaytest.Call{Tool: "refund", Session: session, Step: step, Args: `{"amount":` + amount + `}`}
}

// keyOf is the derived key of c.
func keyOf(t testing.TB, c gatewaytest.Call) string {
	return gatewaytest.DerivedKey(t, c.Session, c.Step, c.Tool, c.Args)
}

// pendingID asserts 409 approval_pending with its members and returns the
// approval id.
func pendingID(t testing.TB, r gatewaytest.Response) string {
	t.Helper()
	p := gatewaytest.WantProblem(t, r, http.StatusConflict, wire.CodeApprovalPending)
	id, _ := p["approval_id"].(string)
	if len(id) != 26 || p["approval_expires_at"] == nil || p["retryable"] != true || r.Header.Get("Retry-After") == "" {
		t.Fatalf("approval_pending without its members: %s (Retry-After %q)", r.Body, r.Header.Get("Retry-After"))
	}
	return id
}

// decideApproval approves or denies id in the store, as the admin API does.
func decideApproval(t testing.TB, h *gatewaytest.Harness, id string, approve bool, note string) {
	t.Helper()
	if !approve && note == "" {
		note = "no" // a deny needs a note
	}
	if _, err := h.Store.(idempotency.Approvals).DecideApproval(context.Background(), id, idempotency.ApprovalDecision{Approve: approve, By: "finance-ops", Note: note}); err != nil {
		t.Fatalf("decide approval %s: %v", id, err)
	}
}

func TestDecideAllowDenyApprove(t *testing.T) {
	gatewaytest.ForEachStore(t, func(t *testing.T, kind storeKind) {
		h, tool := decideHarness(t, kind, callpath.ApprovalSettings{})
		if r := h.Do(refund("s", 1, "50")); r.Status != http.StatusOK {
			t.Fatalf("allowed call: %d %s", r.Status, r.Body)
		}
		deny := refund("s", 2, "50000")
		p := gatewaytest.WantProblem(t, h.Do(deny), http.StatusForbidden, wire.CodeCallDenied)
		if p["reason"] != "refunds above 10 000 are not an agent's call" || p["retryable"] != false {
			t.Fatalf("call_denied members: %v", p)
		}
		if n := tool.Runs(keyOf(t, deny)); n != 0 {
			t.Fatalf("denied call ran %d times", n)
		}

		// An approval for 500 never runs 900.
		c500 := refund("s", 3, "500")
		id := pendingID(t, h.Do(c500))
		if again := pendingID(t, h.Do(c500)); again != id {
			t.Fatalf("repeat answered approval %s, want %s", again, id)
		}
		decideApproval(t, h, id, true, "")
		gatewaytest.WantProblem(t, h.Do(refund("s", 3, "900")), http.StatusUnprocessableEntity, wire.CodeStepConflict)
		other := pendingID(t, h.Do(refund("s", 4, "900")))
		if other == id {
			t.Fatalf("900 at another step got the approval of 500")
		}
		if r := h.Do(c500); r.Status != http.StatusOK {
			t.Fatalf("approved call: %d %s", r.Status, r.Body)
		}
		if r := h.Do(c500); r.Header.Get(wire.HeaderReplayed) != "true" {
			t.Fatalf("second call of the approved key: %d replayed=%q", r.Status, r.Header.Get(wire.HeaderReplayed))
		}
		if n900a, n900b, n500 := tool.Runs(keyOf(t, refund("s", 3, "900"))), tool.Runs(keyOf(t, refund("s", 4, "900"))), tool.Runs(keyOf(t, c500)); n900a+n900b != 0 || n500 != 1 {
			t.Fatalf("runs: 900 %d+%d (want 0), 500 %d (want 1)", n900a, n900b, n500)
		}
		// Once per call: the approvals of 500 and of 900 at step 4; the repeat
		// that found 500 pending, the step conflict, the consumption and the
		// replay are not counted again.
		for decision, want := range map[string]float64{"allow": 1, "deny": 1, "approve": 2} {
			if got := decisions(t, h, "refund", decision, "true"); got != want {
				t.Errorf("gateway_decisions_total{decision=%s} = %v, want %v", decision, got, want)
			}
		}
	})
}

func TestApprovalSingleUseUnderConcurrency(t *testing.T) {
	gatewaytest.ForEachStore(t, func(t *testing.T, kind storeKind) {
		h, tool := decideHarness(t, kind, callpath.ApprovalSettings{})
		c := refund("c", 1, "700")
		decideApproval(t, h, pendingID(t, h.Do(c)), true, "")
		var wg sync.WaitGroup
		statuses := make(chan int, 8)
		for range 8 {
			wg.Go(func() { statuses <- h.Do(c).Status })
		}
		wg.Wait()
		close(statuses)
		for s := range statuses {
			if s != http.StatusOK && s != http.StatusConflict {
				t.Errorf("concurrent call of an approved key: %d", s)
			}
		}
		if n := tool.Runs(keyOf(t, c)); n != 1 {
			t.Fatalf("8 concurrent calls of one approved key ran it %d times, want 1", n)
		}
	})
}

func TestApprovalDeniedAndExpired(t *testing.T) {
	gatewaytest.ForEachStore(t, func(t *testing.T, kind storeKind) {
		h, tool := decideHarness(t, kind, callpath.ApprovalSettings{Timeout: 400 * time.Millisecond, UseWithin: 400 * time.Millisecond})
		denied := refund("d", 1, "300")
		decideApproval(t, h, pendingID(t, h.Do(denied)), false, "not this customer")
		for range 2 {
			p := gatewaytest.WantProblem(t, h.Do(denied), http.StatusForbidden, wire.CodeApprovalDenied)
			if p["reason"] != "not this customer" || p["by"] != "finance-ops" || p["retryable"] != false {
				t.Fatalf("approval_denied members: %v", p)
			}
		}
		pending := refund("d", 2, "300") // never decided
		pendingID(t, h.Do(pending))
		unused := refund("d", 3, "300") // approved, never used in time
		decideApproval(t, h, pendingID(t, h.Do(unused)), true, "")
		time.Sleep(600 * time.Millisecond)
		gatewaytest.WantProblem(t, h.Do(pending), http.StatusForbidden, wire.CodeApprovalExpired)
		p := gatewaytest.WantProblem(t, h.Do(unused), http.StatusForbidden, wire.CodeApprovalExpired)
		if p["by"] != "finance-ops" {
			t.Fatalf("expired approved approval should name its approver: %v", p)
		}
		if n := tool.Total.Load(); n != 0 {
			t.Fatalf("denied or expired calls ran %d times", n)
		}
	})
}

func TestReloadedRuleDeniesAnApprovedCall(t *testing.T) {
	gatewaytest.ForEachStore(t, func(t *testing.T, kind storeKind) {
		h, tool := decideHarness(t, kind, callpath.ApprovalSettings{})
		c := refund("r", 1, "800")
		id := pendingID(t, h.Do(c))
		decideApproval(t, h, id, true, "")
		stricter := compileRules(t, "refund", []decide.Rule{
			{When: "args.amount <= 100", Decision: decide.Allow},
			{Decision: decide.Deny, Reason: "refunds frozen"},
		})
		if err := h.GW.Reload(callpath.Settings{Decisions: stricter}); err != nil {
			t.Fatal(err)
		}
		p := gatewaytest.WantProblem(t, h.Do(c), http.StatusForbidden, wire.CodeCallDenied)
		if p["reason"] != "refunds frozen" {
			t.Fatalf("reason = %v", p["reason"])
		}
		if n := tool.Total.Load(); n != 0 {
			t.Fatalf("a call its reloaded rules deny ran %d times", n)
		}
		// Denied before the store: the approval was not consumed.
		rec, err := h.Store.(idempotency.Approvals).GetApproval(context.Background(), id)
		if err != nil || rec.State != idempotency.StateApproved {
			t.Fatalf("approval after the denied call: %v %v, want APPROVED", rec.State, err)
		}
	})
}

func TestPreferWaitRunsOnceApproved(t *testing.T) {
	gatewaytest.ForEachStore(t, func(t *testing.T, kind storeKind) {
		h, tool := decideHarness(t, kind, callpath.ApprovalSettings{})
		c := refund("w", 1, "600")
		id := pendingID(t, h.Do(c))
		// wait=N alone does not wait for a human: approval_pending at once.
		plain := c
		plain.Headers = map[string]string{"Prefer": "wait=20"}
		if r := h.Do(plain); r.Status != http.StatusConflict || r.Header.Get(wire.HeaderPreferenceApplied) != "" {
			t.Fatalf("wait=20 without the approval preference: %d Preference-Applied %q", r.Status, r.Header.Get(wire.HeaderPreferenceApplied))
		}
		waiting := c
		waiting.Headers = map[string]string{"Prefer": "wait=20, approval"}
		done := make(chan gatewaytest.Response, 1)
		go func() { done <- h.Do(waiting) }()
		time.Sleep(200 * time.Millisecond)
		decideApproval(t, h, id, true, "")
		r := <-done
		if r.Status != http.StatusOK || r.Header.Get(wire.HeaderReplayed) != "false" {
			t.Fatalf("waiting call after approval: %d replayed=%q %s", r.Status, r.Header.Get(wire.HeaderReplayed), r.Body)
		}
		if n := tool.Runs(keyOf(t, c)); n != 1 {
			t.Fatalf("ran %d times, want 1", n)
		}
	})
}

func TestObserveModeRunsEverything(t *testing.T) {
	gatewaytest.ForEachStore(t, func(t *testing.T, kind storeKind) {
		tool := gatewaytest.NewTool("refund")
		h := gatewaytest.New(t, kind, []tools.Tool{tool},
			withDecisions(compileRules(t, "refund", refundRules), decide.ModeObserve, callpath.ApprovalSettings{}))
		for i, amount := range []string{"50", "500", "50000"} {
			if r := h.Do(refund("o", uint64(i+1), amount)); r.Status != http.StatusOK {
				t.Fatalf("observe mode, amount %s: %d %s", amount, r.Status, r.Body)
			}
		}
		if n := tool.Total.Load(); n != 3 {
			t.Fatalf("ran %d calls, want 3", n)
		}
		for decision, want := range map[string]float64{"allow": 1, "approve": 1, "deny": 1} {
			if got := decisions(t, h, "refund", decision, "false"); got != want {
				t.Errorf("gateway_decisions_total{decision=%s,enforced=false} = %v, want %v", decision, got, want)
			}
			if got := decisions(t, h, "refund", decision, "true"); got != 0 {
				t.Errorf("enforced %s counted %v in observe mode", decision, got)
			}
		}
	})
}

// recordingNotifier keeps what the call path notified.
type recordingNotifier struct {
	mu   sync.Mutex
	sent []notify.Pending
}

func (n *recordingNotifier) Notify(p notify.Pending) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.sent = append(n.sent, p)
	return nil
}

func (n *recordingNotifier) Stats() notify.Stats {
	n.mu.Lock()
	defer n.mu.Unlock()
	return notify.Stats{Delivered: uint64(len(n.sent))}
}

func TestNewPendingApprovalNotifiedOnce(t *testing.T) {
	n := &recordingNotifier{}
	h, _ := decideHarness(t, storeEmbedded, callpath.ApprovalSettings{}, func(o *callpath.Options) { o.Notifier = n })
	c := refund("n", 7, "250")
	id := pendingID(t, h.Do(c))
	pendingID(t, h.Do(c))
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.sent) != 1 {
		t.Fatalf("notified %d times, want once", len(n.sent))
	}
	got := n.sent[0]
	if got.ApprovalID != id || got.Tool != "refund" || got.Session != "n" || got.Step != 7 || !got.HasStep ||
		string(got.CanonicalArguments) != `{"amount":250}` || got.Rule != 1 || got.Reason != "refunds above 100 need finance" {
		t.Fatalf("notification: %+v", got)
	}
}

// decisions reads gateway_decisions_total{tool,decision,enforced}.
func decisions(t testing.TB, h *gatewaytest.Harness, tool, decision, enforced string) float64 {
	t.Helper()
	families, err := h.Reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "gateway_decisions_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["tool"] == tool && labels["decision"] == decision && labels["enforced"] == enforced {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestDecideFailsClosed: a rule that cannot be evaluated (a key the
// arguments lack, read without has()) denies the call; a tool that keeps
// no record (read-only) cannot be approved, so an approve denies it too.
func TestDecideFailsClosed(t *testing.T) {
	broken, lookup := gatewaytest.NewTool("broken"), gatewaytest.NewTool("lookup")
	lookup.ReadOnly = true
	d := compileRules(t, "broken", []decide.Rule{{When: "args.missing > 1", Decision: decide.Allow}, {Decision: decide.Allow}})
	for name, p := range compileRules(t, "lookup", []decide.Rule{{Decision: decide.Approve}}) {
		d[name] = p
	}
	h := gatewaytest.New(t, storeEmbedded, []tools.Tool{broken, lookup}, withDecisions(d, decide.ModeEnforce, callpath.ApprovalSettings{}))
	p := gatewaytest.WantProblem(t, h.Do(gatewaytest.Call{Tool: "broken", Session: "f", Step: 1, Args: `{"amount":1}`}), http.StatusForbidden, wire.CodeCallDenied)
	if p["reason"] != "the decide rule could not be evaluated" {
		t.Fatalf("reason = %v", p["reason"])
	}
	gatewaytest.WantProblem(t, h.Do(gatewaytest.Call{Tool: "lookup", Args: `{}`}), http.StatusForbidden, wire.CodeCallDenied)
	if n := broken.Total.Load() + lookup.Total.Load(); n != 0 {
		t.Fatalf("refused calls ran %d times", n)
	}
}

// TestApprovalsOnRedisCluster: on a three-master Redis Cluster, where a
// record and its step entry must share a slot, an approval for 500 never
// runs 900 (step_conflict at its step, its own approval at another), and
// 8 concurrent calls of the approved key run it once.
func TestApprovalsOnRedisCluster(t *testing.T) {
	cluster := redistest.StartCluster(t, 3)
	client := cluster.Client()
	t.Cleanup(func() { _ = client.Close() })
	store := redisstore.New(client, redisstore.Options{Prefix: redistest.Prefix("decide")})
	h, tool := decideHarness(t, gatewaytest.Redis, callpath.ApprovalSettings{}, func(o *callpath.Options) { o.Store = store })
	c500 := refund("cl", 1, "500")
	id := pendingID(t, h.Do(c500))
	decideApproval(t, h, id, true, "")
	gatewaytest.WantProblem(t, h.Do(refund("cl", 1, "900")), http.StatusUnprocessableEntity, wire.CodeStepConflict)
	if other := pendingID(t, h.Do(refund("cl", 2, "900"))); other == id {
		t.Fatal("900 at another step got the approval of 500")
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if s := h.Do(c500).Status; s != http.StatusOK && s != http.StatusConflict {
				t.Errorf("concurrent call of the approved key: %d", s)
			}
		})
	}
	wg.Wait()
	if n500, n900 := tool.Runs(keyOf(t, c500)), tool.Runs(keyOf(t, refund("cl", 2, "900"))); n500 != 1 || n900 != 0 {
		t.Fatalf("runs: 500 %d (want 1), 900 %d (want 0)", n500, n900)
	}
}

// TestEffectKeyApprovalAskedOnceAcrossSessions: one refund asked for from
// four sessions, each under its own key and step, whose rules say
// approve: a person is asked once (one pending approval; the other
// sessions wait with it, 409 request_in_progress), the approved call runs
// once at the tool, and the other sessions replay it. The same on every
// store.
func TestEffectKeyApprovalAskedOnceAcrossSessions(t *testing.T) {
	gatewaytest.ForEachStore(t, func(t *testing.T, kind storeKind) {
		h, tool := decideHarness(t, kind, callpath.ApprovalSettings{},
			gatewaytest.WithPolicy("refund", tools.Policy{EffectKey: "refund:{/txn_id}"}))
		call := func(session string) gatewaytest.Call {
			return gatewaytest.Call{Tool: "refund", Session: session, Step: 1, Args: `{"amount":500,"txn_id":"t-9"}`}
		}
		id := pendingID(t, h.Do(call("s0")))
		for _, session := range []string{"s1", "s2", "s3"} {
			gatewaytest.WantProblem(t, h.Do(call(session)), http.StatusConflict, wire.CodeRequestInProgress)
		}
		page, err := h.Store.(idempotency.Approvals).ListApprovals(t.Context(), idempotency.ApprovalFilter{State: idempotency.StateAwaitingApproval, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Records) != 1 || page.Records[0].Approval.ID != id {
			t.Fatalf("%d pending approvals, want only %s: a person would be asked more than once", len(page.Records), id)
		}
		decideApproval(t, h, id, true, "")
		if r := h.Do(call("s0")); r.Status != http.StatusOK {
			t.Fatalf("approved call: %d %s", r.Status, r.Body)
		}
		for _, session := range []string{"s1", "s2", "s3"} {
			if r := h.Do(call(session)); r.Status != http.StatusOK || r.Header.Get(wire.HeaderEffectKeyReplayed) != "true" {
				t.Fatalf("session %s after the approved run: %d, Effect-Key-Replayed %q, want the replay", session, r.Status, r.Header.Get(wire.HeaderEffectKeyReplayed))
			}
		}
		if n := tool.Total.Load(); n != 1 {
			t.Fatalf("the refund ran %d times, want 1", n)
		}
	})
}

// TestEffectKeyApprovedLoserKeepsItsApproval: two sessions' refunds of one
// transaction were approved before the tool had its effect_key (a config
// reload while they waited). The first runs; the second finds the effect
// held: it replays the first's outcome and keeps its approval, unused, and
// its next call replays again: no person is asked again, and the refund
// ran once at the tool. The same on every store.
func TestEffectKeyApprovedLoserKeepsItsApproval(t *testing.T) {
	gatewaytest.ForEachStore(t, func(t *testing.T, kind storeKind) {
		before, tool := decideHarness(t, kind, callpath.ApprovalSettings{})
		call := func(session string) gatewaytest.Call {
			return gatewaytest.Call{Tool: "refund", Session: session, Step: 1, Args: `{"amount":500,"txn_id":"t-7"}`}
		}
		first, second := pendingID(t, before.Do(call("s0"))), pendingID(t, before.Do(call("s1")))
		decideApproval(t, before, first, true, "")
		decideApproval(t, before, second, true, "")
		after, afterTool := decideHarness(t, kind, callpath.ApprovalSettings{},
			gatewaytest.WithPolicy("refund", tools.Policy{EffectKey: "refund:{/txn_id}"}), func(o *callpath.Options) { o.Store = before.Store })
		if r := after.Do(call("s0")); r.Status != http.StatusOK {
			t.Fatalf("first approved call: %d %s", r.Status, r.Body)
		}
		for range 2 {
			r := after.Do(call("s1"))
			if r.Status != http.StatusOK || r.Header.Get(wire.HeaderEffectKeyReplayed) != "true" {
				t.Fatalf("the second approved call: %d %s, Effect-Key-Replayed %q; want the first's replay", r.Status, r.Body, r.Header.Get(wire.HeaderEffectKeyReplayed))
			}
			rec, err := after.Store.(idempotency.Approvals).GetApproval(t.Context(), second)
			if err != nil || rec.State != idempotency.StateApproved {
				t.Fatalf("the second call's approval after its replay: %v, %v; want it kept, APPROVED", rec.State, err)
			}
		}
		if n := tool.Total.Load() + afterTool.Total.Load(); n != 1 {
			t.Fatalf("the refund ran %d times, want 1", n)
		}
	})
}
