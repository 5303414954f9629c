package gateway_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/decide"
	"github.com/toolgateway/toolgateway/gateway/gatewaytest"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/boltstore"
	"github.com/toolgateway/toolgateway/gateway/idempotency/pgstore"
	"github.com/toolgateway/toolgateway/gateway/receipts"
	"github.com/toolgateway/toolgateway/gateway/receipts/boltreceipts"
	"github.com/toolgateway/toolgateway/gateway/receipts/pgreceipts"
	"github.com/toolgateway/toolgateway/gateway/receipts/redisreceipts"
	"github.com/toolgateway/toolgateway/internal/redistest"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// receiptsBeside opens the receipts store beside store, as the program
// does: the embedded file, the PostgreSQL schema, a Redis prefix.
func receiptsBeside(t testing.TB, store idempotency.Store) receipts.Store {
	t.Helper()
	return receiptsOpener(t, store)()
}

// receiptsOpener returns what opens a receipts store beside store; each
// call a new one on the same chains, as another process has.
func receiptsOpener(t testing.TB, store idempotency.Store) func() receipts.Store {
	t.Helper()
	switch s := store.(type) {
	case *boltstore.Store:
		return func() receipts.Store {
			r, err := boltreceipts.New(s.DB(), nil)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
	case *pgstore.Store:
		return func() receipts.Store {
			r, err := pgreceipts.New(context.Background(), s.Pool(), s.Schema(), nil)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
	}
	client := redis.NewClient(&redis.Options{Addr: redistest.Addr(t)})
	prefix := redistest.Prefix("gwreceipts")
	t.Cleanup(func() {
		redistest.CleanPrefix(context.Background(), client, prefix)
		_ = client.Close()
	})
	return func() receipts.Store { return redisreceipts.New(client, prefix, nil) }
}

// receiptsHarness serves "refund" under refundRules with receipts on and
// the admin API at token "tok-admin".
func receiptsHarness(t *testing.T, kind storeKind) (*gatewaytest.Harness, *gatewaytest.Tool, receipts.Store) {
	store := newStore(t, kind)
	rs := receiptsBeside(t, store)
	tool := gatewaytest.NewTool("refund")
	h := gatewaytest.New(t, kind, []tools.Tool{tool}, withStore(store), withAdmin("tok-admin"),
		withDecisions(compileRules(t, "refund", refundRules), decide.ModeEnforce, callpath.ApprovalSettings{}),
		func(o *callpath.Options) { o.Receipts = rs })
	return h, tool, rs
}

// chainOf waits until tenant's chain holds n receipts and returns them.
func chainOf(t testing.TB, rs receipts.Store, tenant string, n int) []receipts.Receipt {
	t.Helper()
	var got []receipts.Receipt
	gatewaytest.Eventually(t, 10*time.Second, "receipts written", func() bool {
		page, _, err := rs.List(context.Background(), receipts.Filter{Tenant: tenant, Limit: receipts.MaxLimit})
		if err != nil {
			t.Fatal(err)
		}
		got = page
		return len(page) >= n
	})
	return got
}

// adminPostAs posts body to an admin path with the admin token.
func adminPostAs(t testing.TB, h *gatewaytest.Harness, path, body string) gatewaytest.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.Srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer tok-admin")
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return gatewaytest.Response{Status: resp.StatusCode, Header: resp.Header, Body: b.Bytes()}
}

func TestReceiptsOfEveryEvent(t *testing.T) {
	gatewaytest.ForEachStore(t, func(t *testing.T, kind storeKind) {
		h, tool, rs := receiptsHarness(t, kind)
		ran := refund("s", 1, "50")
		for range 3 { // one execution, two replays: replays are not receipted
			if r := h.Do(ran); r.Status != http.StatusOK {
				t.Fatalf("allowed call: %d %s", r.Status, r.Body)
			}
		}
		gatewaytest.WantProblem(t, h.Do(refund("s", 2, "50000")), http.StatusForbidden, wire.CodeCallDenied)
		id := pendingID(t, h.Do(refund("s", 3, "500")))
		if r := adminPostAs(t, h, "/admin/v1/approvals/"+id+"/approve", `{"by":"finance-ops"}`); r.Status != http.StatusOK {
			t.Fatalf("approve: %d %s", r.Status, r.Body)
		}
		if r := h.Do(refund("s", 3, "500")); r.Status != http.StatusOK {
			t.Fatalf("approved call: %d %s", r.Status, r.Body)
		}
		key := keyOf(t, ran)
		if r := h.Send(http.MethodDelete, "/admin/v1/records/anonymous/refund/"+key, "tok-admin"); r.Status != http.StatusNoContent {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
		chain := chainOf(t, rs, callpath.AnonymousTenant, 6)
		var events []string
		for _, r := range chain {
			events = append(events, string(r.Event))
		}
		want := "executed denied approval_requested approval_granted executed deleted"
		if got := strings.Join(events, " "); got != want {
			t.Fatalf("events %q, want %q", got, want)
		}
		if tool.Total.Load() != 2 {
			t.Fatalf("tool ran %d times, want 2", tool.Total.Load())
		}
		first := chain[0]
		if first.Status != 200 || first.Decision != "allow" || first.Rule != "decide[0]" || len(first.Policy) != 64 ||
			first.Key != receipts.KeyHash(key) || first.Session != "s" || first.Step != "1" || first.ExecutionID == "" {
			t.Fatalf("executed receipt: %+v", first)
		}
		if chain[1].Decision != "deny" || chain[1].Rule != "decide[2]" || chain[1].ExecutionID != "" {
			t.Fatalf("denied receipt: %+v", chain[1])
		}
		if chain[3].By != "token:admin" || chain[3].ClaimedBy != "finance-ops" || chain[5].By != "token:admin" || chain[5].Key != receipts.KeyHash(key) {
			t.Fatalf("approval granted / deleted receipts: %+v / %+v", chain[3], chain[5])
		}
		var export bytes.Buffer
		if err := receipts.Export(context.Background(), rs, &export); err != nil {
			t.Fatal(err)
		}
		report, err := receipts.Verify(&export)
		if err != nil || !report.OK() || report.Tenants[0].Checked != 6 {
			t.Fatalf("verify: %v %+v", err, report)
		}
	})
}

func TestReceiptsDrainFlushes(t *testing.T) {
	h, _, rs := receiptsHarness(t, storeEmbedded)
	for step := range uint64(20) {
		if r := h.Do(refund("d", step, "5")); r.Status != http.StatusOK {
			t.Fatalf("call: %d %s", r.Status, r.Body)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.GW.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	page, _, err := rs.List(context.Background(), receipts.Filter{Tenant: callpath.AnonymousTenant, Limit: 100})
	if err != nil || len(page) != 20 {
		t.Fatalf("after drain: %d receipts, %v", len(page), err)
	}
	families, err := h.Reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range families {
		if f.GetName() == "gateway_receipts_unwritten_total" {
			found = true
			if n := f.GetMetric()[0].GetCounter().GetValue(); n != 0 {
				t.Fatalf("unwritten %v", n)
			}
		}
	}
	if !found {
		t.Fatal("gateway_receipts_unwritten_total not exported")
	}
}

// TestReceiptsTwoGatewaysOneStore: two gateways on one Redis and on one
// PostgreSQL, each with its own receipts writer (so their appends race on
// the chains' heads), 4 tenants, concurrent calls with replays. After both
// drained: every chain verifies, and every execution the tool counted has
// exactly one executed receipt (matched by execution id).
func TestReceiptsTwoGatewaysOneStore(t *testing.T) {
	tenants := map[string]string{"t1": "tok-1", "t2": "tok-2", "t3": "tok-3", "t4": "tok-4"}
	for _, kind := range []storeKind{storeRedis, storePostgres} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			store := newStore(t, kind)
			open := receiptsOpener(t, store)
			rs := open()
			tool := gatewaytest.NewTool("refund")
			var gws [2]*gatewaytest.Harness
			for i := range gws {
				// Each gateway its own receipts store value: its own
				// Appender, as a second process has.
				own := rs
				if i == 1 {
					own = open()
				}
				gws[i] = gatewaytest.New(t, kind, []tools.Tool{tool}, withStore(store), withTenants(tenants),
					func(o *callpath.Options) { o.Receipts = own })
			}
			var wg sync.WaitGroup
			for n := range 80 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					tenant := "t" + strconv.Itoa(n%4+1)
					c := gatewaytest.Call{Tool: "refund", Session: "s-" + tenant, Step: uint64(n / 8), Args: `{"amount":1}`, Token: tenants[tenant]}
					if r := gws[n%2].Do(c); r.Status != http.StatusOK && r.Status != http.StatusConflict {
						t.Errorf("call %d: %d %s", n, r.Status, r.Body)
					}
				}()
			}
			wg.Wait()
			for _, h := range gws {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				if err := h.GW.Drain(ctx); err != nil {
					t.Fatal(err)
				}
				cancel()
			}
			var export bytes.Buffer
			if err := receipts.Export(context.Background(), rs, &export); err != nil {
				t.Fatal(err)
			}
			report, err := receipts.Verify(bytes.NewReader(export.Bytes()))
			if err != nil || !report.OK() || len(report.Tenants) != 4 {
				t.Fatalf("verify: %v %+v", err, report)
			}
			executed := map[string]int{}
			for _, line := range bytes.Split(bytes.TrimSpace(export.Bytes()), []byte("\n")) {
				r, err := receipts.Decode(line)
				if err != nil {
					t.Fatal(err)
				}
				if r.Event == receipts.EventExecuted {
					executed[r.ExecutionID]++
				}
			}
			if int64(len(executed)) != tool.Total.Load() {
				t.Fatalf("%d executions at the tool, %d executed receipts", tool.Total.Load(), len(executed))
			}
			for id, n := range executed {
				if n != 1 {
					t.Fatalf("execution %s has %d executed receipts", id, n)
				}
			}
		})
	}
}

// TestReceiptsOfUncertainAndResolved: a lease_expiry: unknown tool whose
// upstream's 5xx leaves the record UNKNOWN gets executed (with the 500 the
// client got) and made_unknown; an operator's resolve, resolved; a tool
// error is executed too (the tool ran); a denied approval, approval_denied.
func TestReceiptsOfUncertainAndResolved(t *testing.T) {
	store := newStore(t, storeEmbedded)
	rs := receiptsBeside(t, store)
	pay := gatewaytest.NewTool("pay")
	pay.Behave = func(_ context.Context, req *tools.Request) (*tools.Response, error) {
		if strings.Contains(string(req.Arguments), "error") {
			return nil, errors.New("scripted failure")
		}
		return &tools.Response{Status: 502, Body: []byte(`{}`), Relayed: true}, nil
	}
	refundTool := gatewaytest.NewTool("refund")
	h := gatewaytest.New(t, storeEmbedded, []tools.Tool{pay, refundTool}, withStore(store), withAdmin("tok-admin"),
		withPolicy("pay", tools.Policy{LeaseExpiry: tools.LeaseExpiryUnknown}),
		withDecisions(compileRules(t, "refund", refundRules), decide.ModeEnforce, callpath.ApprovalSettings{}),
		func(o *callpath.Options) { o.Receipts = rs })
	c := gatewaytest.Call{Tool: "pay", Session: "u", Step: 1, Args: `{"x":1}`}
	gatewaytest.WantProblem(t, h.Do(c), http.StatusInternalServerError, wire.CodeToolFailed)
	if r := adminPostAs(t, h, "/admin/v1/records/anonymous/pay/"+keyOf(t, c)+"/resolve", `{"status":200}`); r.Status != http.StatusOK {
		t.Fatalf("resolve: %d %s", r.Status, r.Body)
	}
	if r := h.Do(gatewaytest.Call{Tool: "pay", Session: "u", Step: 2, Args: `{"error":1}`}); r.Status < 500 {
		t.Fatalf("tool error: %d %s", r.Status, r.Body)
	}
	id := pendingID(t, h.Do(refund("u", 3, "500")))
	if r := adminPostAs(t, h, "/admin/v1/approvals/"+id+"/deny", `{"by":"finance-ops","note":"not now"}`); r.Status != http.StatusOK {
		t.Fatalf("deny: %d %s", r.Status, r.Body)
	}
	chain := chainOf(t, rs, callpath.AnonymousTenant, 6)
	var events []string
	for _, r := range chain {
		events = append(events, string(r.Event)+":"+strconv.Itoa(r.Status)+":"+r.By)
	}
	want := "made_unknown:0: executed:500: resolved:200:token:admin executed:500: approval_requested:0: approval_denied:0:token:admin"
	if got := strings.Join(events, " "); got != want {
		t.Fatalf("events %q, want %q", got, want)
	}
}

// TestReceiptOfAnEffectConflict: a call that meets another session's
// holder of its effect key with other arguments leaves an effect_conflict
// receipt beside the holder's executed one; the tool ran once.
func TestReceiptOfAnEffectConflict(t *testing.T) {
	gatewaytest.ForEachStore(t, func(t *testing.T, kind storeKind) {
		store := newStore(t, kind)
		rs := receiptsBeside(t, store)
		tool := gatewaytest.NewTool("refund")
		h := gatewaytest.New(t, kind, []tools.Tool{tool}, withStore(store), func(o *callpath.Options) {
			o.Receipts = rs
			o.Policies = map[string]tools.Policy{"refund": {EffectKey: "refund:{/txn_id}"}}
		})
		if r := h.Do(gatewaytest.Call{Tool: "refund", Session: "s1", Step: 0, Args: `{"amount":5,"txn_id":"t-9"}`}); r.Status != http.StatusOK {
			t.Fatalf("holder: %d %s", r.Status, r.Body)
		}
		gatewaytest.WantProblem(t, h.Do(gatewaytest.Call{Tool: "refund", Session: "s2", Step: 0, Args: `{"amount":6,"txn_id":"t-9"}`}),
			http.StatusConflict, wire.CodeEffectConflict)
		chain := chainOf(t, rs, callpath.AnonymousTenant, 2)
		if len(chain) != 2 || chain[0].Event != receipts.EventExecuted || chain[1].Event != receipts.EventEffectConflict || chain[1].Session != "s2" {
			t.Fatalf("receipts %+v, want executed then effect_conflict (session s2)", chain)
		}
		if n := tool.Total.Load(); n != 1 {
			t.Fatalf("tool ran %d times, want 1", n)
		}
	})
}
