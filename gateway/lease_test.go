package gateway_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

func TestLeaseIsRenewedWhileTheToolRuns(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		tool := newTestTool("slow")
		tool.behave = func(ctx context.Context, req *tools.Request) (*tools.Response, error) {
			select {
			case <-time.After(3 * time.Second): // 3× the lock TTL
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return tools.JSON(200, map[string]any{"done": true})
		}
		h := newHarness(t, kind, []tools.Tool{tool}, withLockTTL(time.Second))
		c := callSpec{tool: "slow", session: "lease", step: 1, args: `{}`}
		done := make(chan response, 1)
		go func() { done <- h.do(c) }()
		eventually(t, 2*time.Second, "the tool to start", func() bool { return tool.total.Load() == 1 })
		duplicates := 0
		for {
			select {
			case first := <-done:
				if first.status != 200 {
					t.Fatalf("slow call: %d %s", first.status, first.body)
				}
				if duplicates < 5 {
					t.Fatalf("only %d duplicates observed", duplicates)
				}
				if tool.total.Load() != 1 {
					t.Fatalf("tool ran %d times under a renewed lease", tool.total.Load())
				}
				return
			case <-time.After(200 * time.Millisecond):
				r := h.do(c)
				p := wantProblem(t, r, 409, wire.CodeRequestInProgress)
				_ = p
				if ra := r.header.Get("Retry-After"); ra == "" || ra == "0" {
					t.Fatalf("Retry-After %q", ra)
				}
				duplicates++
			}
		}
	})
}

func TestLostLeaseCancelsTheToolAndNeverOverwrites(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		tool := newTestTool("slow")
		cancelled := make(chan error, 1)
		tool.behave = func(ctx context.Context, req *tools.Request) (*tools.Response, error) {
			select {
			case <-time.After(10 * time.Second):
				return tools.JSON(200, map[string]any{"late": true})
			case <-ctx.Done():
				cancelled <- ctx.Err()
				return tools.JSON(200, map[string]any{"late": true})
			}
		}
		h := newHarness(t, kind, []tools.Tool{tool}, withLockTTL(600*time.Millisecond))
		c := callSpec{tool: "slow", session: "lost", step: 1, args: `{}`}
		done := make(chan response, 1)
		go func() { done <- h.do(c) }()
		eventually(t, 2*time.Second, "the tool to start", func() bool { return tool.total.Load() == 1 })
		key := derivedKey(t, "lost", 1, "slow", `{}`)
		if err := h.store.Delete(context.Background(), idempotency.Scope{Tenant: gateway.AnonymousTenant, Tool: "slow", Key: key}); err != nil {
			t.Fatalf("delete under the running tool: %v", err)
		}
		select {
		case <-cancelled:
		case <-time.After(3 * time.Second):
			t.Fatal("the tool's context was not cancelled after the lease was lost")
		}
		<-done
		if _, err := h.store.Get(context.Background(), idempotency.Scope{Tenant: gateway.AnonymousTenant, Tool: "slow", Key: key}); !errors.Is(err, idempotency.ErrNotFound) {
			t.Fatalf("the old owner wrote its outcome after losing the lease: %v", err)
		}
		if lost := metricValue(t, h, "gateway_leases_lost_total", "slow"); lost != 1 {
			t.Fatalf("gateway_leases_lost_total = %v, want 1", lost)
		}
	})
}

func TestAbandonedClaimIsTakenOverOrBecomesUnknown(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		rerun := newTestTool("rerun-tool")
		once := newTestTool("pay-once")
		h := newHarness(t, kind, []tools.Tool{rerun, once}, withAdmin("admin-secret"),
			withPolicy("pay-once", tools.Policy{LeaseExpiry: idempotency.LeaseExpiryUnknown}))
		ctx := context.Background()
		// A "dead" gateway: it claimed with a short lease and never came back.
		abandon := func(tool, args string) (string, int64) {
			key := derivedKey(t, "crash-"+tool, 1, tool, args)
			d, err := h.store.Claim(ctx, idempotency.ClaimRequest{
				Scope: idempotency.Scope{Tenant: gateway.AnonymousTenant, Tool: tool, Key: key}, Fingerprint: fingerprintOf(t, args),
				Step: &idempotency.Step{SessionID: "crash-" + tool, Index: 1}, StepGuard: true,
				ExecutionID: ulid.Make().String(), Owner: "dead-gateway", LockTTL: 300 * time.Millisecond,
				ReplayTTL: time.Hour, LeaseExpiry: idempotency.LeaseExpiryRerun,
			})
			if err != nil || d.Outcome != idempotency.OutcomeClaimed {
				t.Fatalf("dead gateway's claim: %v %v", d.Outcome, err)
			}
			return d.Lease.ExecutionID, d.Lease.FencingToken
		}
		deadExec, deadFence := abandon("rerun-tool", `{"v":1}`)
		r := h.do(callSpec{tool: "rerun-tool", session: "crash-rerun-tool", step: 1, args: `{"v":1}`})
		wantProblem(t, r, 409, wire.CodeRequestInProgress)
		time.Sleep(400 * time.Millisecond)
		var fence int64
		rerun.behave = func(ctx context.Context, req *tools.Request) (*tools.Response, error) {
			fence = req.FencingToken
			return tools.JSON(200, map[string]any{"ok": true})
		}
		r = h.do(callSpec{tool: "rerun-tool", session: "crash-rerun-tool", step: 1, args: `{"v":1}`})
		if r.status != 200 || r.header.Get("Tool-Execution-Id") == deadExec || rerun.total.Load() != 1 {
			t.Fatalf("takeover: %d exec=%s runs=%d", r.status, r.header.Get("Tool-Execution-Id"), rerun.total.Load())
		}
		if fence <= deadFence {
			t.Fatalf("takeover fencing token %d not larger than the dead owner's %d", fence, deadFence)
		}

		abandon("pay-once", `{"v":1}`)
		time.Sleep(400 * time.Millisecond)
		c := callSpec{tool: "pay-once", session: "crash-pay-once", step: 1, args: `{"v":1}`}
		for i := 0; i < 2; i++ {
			r = h.do(c)
			p := wantProblem(t, r, 409, wire.CodeOutcomeUnknown)
			if r.header.Get("Retry-After") != "" || p["retryable"] != false {
				t.Fatalf("outcome_unknown must have no Retry-After and not be retryable: %v %s", r.header, r.body)
			}
		}
		if once.total.Load() != 0 {
			t.Fatal("a lease_expiry: unknown tool ran a second time")
		}
		// The operator checks the side effect, inspects and deletes the record.
		key := derivedKey(t, "crash-pay-once", 1, "pay-once", `{"v":1}`)
		path := "/admin/v1/records/anonymous/pay-once/" + key
		wantProblem(t, h.get(path, "wrong"), 401, wire.CodeUnauthorized)
		rec := h.get(path, "admin-secret")
		if rec.status != 200 || mustJSON(t, rec.body)["state"] != "UNKNOWN" {
			t.Fatalf("admin get: %d %s", rec.status, rec.body)
		}
		if del := h.send(http.MethodDelete, path, "admin-secret"); del.status != 204 {
			t.Fatalf("admin delete: %d %s", del.status, del.body)
		}
		wantProblem(t, h.get(path, "admin-secret"), 404, wire.CodeRecordNotFound)
		if r = h.do(c); r.status != 200 || once.total.Load() != 1 {
			t.Fatalf("after delete: %d runs=%d", r.status, once.total.Load())
		}
		rec = h.get(path, "admin-secret")
		got := mustJSON(t, rec.body)
		if got["state"] != "COMPLETED" || got["response_status"] != float64(200) || got["fingerprint"] != fingerprintOf(t, `{"v":1}`) || got["execution_id"] != r.header.Get("Tool-Execution-Id") {
			t.Fatalf("admin record after completion: %s", rec.body)
		}
	})
}

// TestCompletionIsRetriedThroughAStoreRestart: a completion that meets a
// restarting store is retried under the lease, so the outcome is recorded
// and a retry replays it instead of running the tool again.
func TestCompletionIsRetriedThroughAStoreRestart(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		tool := newTestTool("provision")
		hs := &hookStore{Store: newStore(t, kind)}
		hs.failCompletes.Store(3)
		h := newHarness(t, kind, []tools.Tool{tool}, withStore(hs))
		c := callSpec{tool: "provision", session: "restart", step: 1, args: `{}`}
		first := h.do(c)
		if first.status != 200 || first.header.Get("Idempotent-Replayed") != "false" {
			t.Fatalf("first: %d %s", first.status, first.body)
		}
		again := h.do(c)
		if again.header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(again.body, first.body) {
			t.Fatalf("the outcome was not recorded: %d replayed=%q", again.status, again.header.Get("Idempotent-Replayed"))
		}
		if tool.total.Load() != 1 || hs.failCompletes.Load() >= 0 {
			t.Fatalf("tool ran %d times; failures left %d", tool.total.Load(), hs.failCompletes.Load())
		}
	})
}

// A tool that finishes just before its timeout, whose completion is then
// retried through a store restart, must keep its lease until the outcome
// lands: another request must not take the call over and run it again.
// (The lease keeper's context was a child of the tool's timeout context, so
// renewals stopped at the tool deadline while finish() still retried.)
func TestLeaseHeldWhileCompletionRetriesPastToolTimeout(t *testing.T) {
	for _, kind := range allStores {
		t.Run(string(kind), func(t *testing.T) {
			tool := newTestTool("review-slow")
			var first atomic.Bool
			tool.behave = func(ctx context.Context, req *tools.Request) (*tools.Response, error) {
				if first.CompareAndSwap(false, true) {
					time.Sleep(350 * time.Millisecond) // under the 400ms timeout
				}
				return tools.JSON(200, map[string]any{"ok": true})
			}
			hs := &hookStore{Store: newStore(t, kind)}
			hs.failCompletes.Store(5) // completion attempts at ~0, 50, 150, 350, 750ms fail; ~1250ms lands
			h := newHarness(t, kind, []tools.Tool{tool}, withStore(hs), withLockTTL(300*time.Millisecond),
				withPolicy("review-slow", tools.Policy{Timeout: 400 * time.Millisecond}))
			spec := callSpec{tool: "review-slow", session: "s-review", step: 1, args: `{}`}
			firstDone := make(chan response, 1)
			go func() { firstDone <- h.do(spec) }()

			// 1s in, the owner is still retrying its completion.
			time.Sleep(time.Second)
			second := h.do(spec)
			if got := <-firstDone; got.status != http.StatusOK {
				t.Fatalf("first call: %d %s", got.status, got.body)
			}
			key := derivedKey(t, "s-review", 1, "review-slow", `{}`)
			if n := tool.runs(key); n != 1 {
				t.Fatalf("tool ran %d times (second call: %d %s): the lease lapsed while its owner was still recording the outcome", n, second.status, second.body)
			}
		})
	}
}

// lostReplyStore lands the first Complete, then reports a transport error,
// as when the reply is lost on the wire.
type lostReplyStore struct {
	idempotency.Store
	lost atomic.Bool
}

func (s *lostReplyStore) Complete(ctx context.Context, l idempotency.Lease, resp idempotency.StoredResponse, ttl time.Duration) error {
	err := s.Store.Complete(ctx, l, resp, ttl)
	if err == nil && s.lost.CompareAndSwap(false, true) {
		return errors.New("read tcp: connection reset by peer")
	}
	return err
}

// finish() retries a completion whose reply was lost; the retry answers
// "lease lost" because the first attempt landed. That must not be logged
// and counted as an unrecorded outcome: the call replays fine.
func TestCompletionRetryAfterLostReplyIsNotUnrecorded(t *testing.T) {
	for _, kind := range allStores {
		t.Run(string(kind), func(t *testing.T) {
			tool := newTestTool("review-lost")
			h := newHarness(t, kind, []tools.Tool{tool}, withStore(&lostReplyStore{Store: newStore(t, kind)}))
			if r := h.do(callSpec{tool: "review-lost", session: "s", step: 1}); r.status != http.StatusOK {
				t.Fatalf("%d %s", r.status, r.body)
			}
			if r := h.do(callSpec{tool: "review-lost", session: "s", step: 1}); r.header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("not replayed: %d %s", r.status, r.body)
			}
			families, err := h.reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range families {
				if f.GetName() != "gateway_outcomes_unrecorded_total" {
					continue
				}
				for _, m := range f.GetMetric() {
					if v := m.GetCounter().GetValue(); v != 0 {
						t.Fatalf("gateway_outcomes_unrecorded_total = %v, but the outcome was recorded and replays", v)
					}
				}
			}
		})
	}
}
