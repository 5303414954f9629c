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

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// leaseProbeStore wraps a store for the lease tests. It reports every
// renewal that landed, so a test waits for renewals (events) instead of
// guessing how far the keeper got in some wall-clock time; and while
// restarting is set it fails completions as a Redis replaying its AOF
// does. The lock TTLs stay long against the scheduling delays of a loaded
// machine: a lease that lapses because its keeper was starved for a whole
// lock_ttl may be taken over, rightly, and no test here is about that.
type leaseProbeStore struct {
	idempotency.Store
	renewed          chan time.Time // when each renewal that landed started
	restarting       atomic.Bool
	completeAttempts atomic.Int32
}

func newLeaseProbe(s idempotency.Store) *leaseProbeStore {
	return &leaseProbeStore{Store: s, renewed: make(chan time.Time, 1024)}
}

func (s *leaseProbeStore) Renew(ctx context.Context, l idempotency.Lease, ttl time.Duration) error {
	start := time.Now()
	err := s.Store.Renew(ctx, l, ttl)
	if err == nil {
		select {
		case s.renewed <- start:
		default: // nobody is waiting for that many; the test reads the latest
		}
	}
	return err
}

func (s *leaseProbeStore) Complete(ctx context.Context, l idempotency.Lease, resp idempotency.StoredResponse, ttl time.Duration) error {
	s.completeAttempts.Add(1)
	if s.restarting.Load() {
		return errors.New("leaseprobe: LOADING Redis is loading the dataset in memory")
	}
	return s.Store.Complete(ctx, l, resp, ttl)
}

// waitRenewalAfter waits until a renewal that started after since has
// landed: from then on the lease is good for a whole lock_ttl.
func (s *leaseProbeStore) waitRenewalAfter(t *testing.T, since time.Time) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case start := <-s.renewed:
			if start.After(since) {
				return
			}
		case <-timeout:
			t.Fatalf("no lease renewal landed after %s", since.Format(time.StampMilli))
		}
	}
}

// TestLeaseIsRenewedWhileTheToolRuns: a tool that runs for several lock
// TTLs keeps its lease; a duplicate meanwhile gets request_in_progress and
// the tool runs once.
func TestLeaseIsRenewedWhileTheToolRuns(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		const lockTTL = time.Second
		tool := newTestTool("slow")
		tool.started = make(chan *tools.Request, 1)
		release := make(chan struct{})
		tool.behave = func(ctx context.Context, req *tools.Request) (*tools.Response, error) {
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return tools.JSON(200, map[string]any{"done": true})
		}
		store := newLeaseProbe(newStore(t, kind))
		h := newHarness(t, kind, []tools.Tool{tool}, withStore(store), withLockTTL(lockTTL))
		c := callSpec{tool: "slow", session: "lease", step: 1, args: `{}`}
		done := make(chan response, 1)
		go func() { done <- h.do(c) }()
		<-tool.started
		claimed := time.Now() // the claim's lease ran out by claimed + lockTTL at the latest

		// Past one, two and three lock TTLs the tool still runs: after a
		// renewal from then, a duplicate finds the call in progress.
		for i := range 3 {
			store.waitRenewalAfter(t, claimed.Add(time.Duration(i+1)*lockTTL))
			r := h.do(c)
			wantProblem(t, r, 409, wire.CodeRequestInProgress)
			if ra := r.header.Get("Retry-After"); !wholeSeconds.MatchString(ra) {
				t.Fatalf("Retry-After %q", ra)
			}
		}
		close(release)
		if first := <-done; first.status != 200 {
			t.Fatalf("slow call: %d %s", first.status, first.body)
		}
		if tool.total.Load() != 1 {
			t.Fatalf("tool ran %d times under a renewed lease", tool.total.Load())
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
		eventually(t, 30*time.Second, "the tool to start", func() bool { return tool.total.Load() == 1 })
		key := derivedKey(t, "lost", 1, "slow", `{}`)
		if err := h.store.Delete(context.Background(), idempotency.Scope{Tenant: callpath.AnonymousTenant, Tool: "slow", Key: key}); err != nil {
			t.Fatalf("delete under the running tool: %v", err)
		}
		select {
		case <-cancelled:
		case <-time.After(30 * time.Second):
			t.Fatal("the tool's context was not cancelled after the lease was lost")
		}
		<-done
		if _, err := h.store.Get(context.Background(), idempotency.Scope{Tenant: callpath.AnonymousTenant, Tool: "slow", Key: key}); !errors.Is(err, idempotency.ErrNotFound) {
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
		// A "dead" gateway: it claimed, renewed its lease for the last time
		// with lastTTL left, and never came back.
		abandon := func(tool, args string, lastTTL time.Duration) idempotency.Lease {
			key := derivedKey(t, "crash-"+tool, 1, tool, args)
			d, err := h.store.Claim(ctx, idempotency.ClaimRequest{
				Scope: idempotency.Scope{Tenant: callpath.AnonymousTenant, Tool: tool, Key: key}, Fingerprint: fingerprintOf(t, args),
				Step: &idempotency.Step{SessionID: "crash-" + tool, Index: 1}, StepGuard: true,
				ExecutionID: ulid.Make().String(), Owner: "dead-gateway", LockTTL: lastTTL,
				ReplayTTL: time.Hour, LeaseExpiry: idempotency.LeaseExpiryRerun,
			})
			if err != nil || d.Outcome != idempotency.OutcomeClaimed {
				t.Fatalf("dead gateway's claim: %v %v", d.Outcome, err)
			}
			return d.Lease
		}
		// While its lease lives (a minute: no test run is that slow), the
		// call is in progress; then its last renewal leaves 300ms, and the
		// sleep outlasts them (however late it wakes, the lease is over).
		dead := abandon("rerun-tool", `{"v":1}`, time.Minute)
		deadExec, deadFence := dead.ExecutionID, dead.FencingToken
		r := h.do(callSpec{tool: "rerun-tool", session: "crash-rerun-tool", step: 1, args: `{"v":1}`})
		wantProblem(t, r, 409, wire.CodeRequestInProgress)
		if err := h.store.Renew(ctx, dead, 300*time.Millisecond); err != nil {
			t.Fatalf("dead gateway's last renewal: %v", err)
		}
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

		abandon("pay-once", `{"v":1}`, 300*time.Millisecond)
		time.Sleep(400 * time.Millisecond) // the lease is over, however late this wakes
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

// A tool whose completion is retried through a store restart must keep its
// lease until the outcome lands, past the tool's deadline: another request
// must not take the call over and run it again. (The lease keeper's context
// was a child of the tool's timeout context, so renewals stopped at the
// tool deadline while finish() still retried.) The test waits for events,
// not for time: the store keeps failing the completion until a renewal
// has landed after the claim's own lease (and the tool's deadline) ran
// out, and a second request then finds the call in progress.
func TestLeaseHeldWhileCompletionRetriesPastToolTimeout(t *testing.T) {
	for _, kind := range allStores {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			const lockTTL, toolTimeout = 1500 * time.Millisecond, 300 * time.Millisecond
			tool := newTestTool("review-slow")
			tool.started = make(chan *tools.Request, 2)
			store := newLeaseProbe(newStore(t, kind))
			store.restarting.Store(true)
			h := newHarness(t, kind, []tools.Tool{tool}, withStore(store), withLockTTL(lockTTL),
				withPolicy("review-slow", tools.Policy{Timeout: toolTimeout}))
			spec := callSpec{tool: "review-slow", session: "s-review", step: 1, args: `{}`}
			firstDone := make(chan response, 1)
			go func() { firstDone <- h.do(spec) }()
			<-tool.started // it answers at once; its completion fails meanwhile
			claimed := time.Now()

			// A renewal after the claim's lease and the tool's deadline both
			// ran out: the keeper outlived the tool's deadline.
			store.waitRenewalAfter(t, claimed.Add(max(lockTTL, toolTimeout)))
			wantProblem(t, h.do(spec), http.StatusConflict, wire.CodeRequestInProgress)
			if n := store.completeAttempts.Load(); n < 2 {
				t.Fatalf("%d completion attempts while the store restarted, want the completion retried", n)
			}
			store.restarting.Store(false)
			first := <-firstDone
			if first.status != http.StatusOK {
				t.Fatalf("first call: %d %s", first.status, first.body)
			}
			again := h.do(spec)
			if again.header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(again.body, first.body) {
				t.Fatalf("after the restart: %d replayed=%q %s, want the replay of %s", again.status, again.header.Get("Idempotent-Replayed"), again.body, first.body)
			}
			if n := tool.runs(derivedKey(t, "s-review", 1, "review-slow", `{}`)); n != 1 {
				t.Fatalf("tool ran %d times: the lease lapsed while its owner was still recording the outcome", n)
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
