package gateway_test

// Regression tests for bugs a code review found: the lease must outlive the
// tool's deadline while the outcome is being recorded, a drain is bounded
// even when a tool ignores cancellation, Prefer: wait polls end with a
// shutdown, and a completion whose reply was lost is not "unrecorded".

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/keyderive"
	"github.com/toolgateway/toolgateway/tools"
)

// A tool that finishes just before its timeout, whose completion is then
// retried through a store restart, must keep its lease until the outcome
// lands: another request must not take the call over and run it again.
// (The lease keeper's context was a child of the tool's timeout context, so
// renewals stopped at the tool deadline while finish() still retried.)
func TestReviewLeaseHeldWhileCompletionRetriesPastToolTimeout(t *testing.T) {
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
				withPolicy("review-slow", gateway.ToolPolicy{Timeout: 400 * time.Millisecond}))
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
func TestReviewCompletionRetryAfterLostReplyIsNotUnrecorded(t *testing.T) {
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

// Drain is the contract's "bounded drain": once its context ends it must
// return, even if a tool ignores the cancellation.
func TestReviewDrainBoundedWithToolIgnoringCancellation(t *testing.T) {
	tool := newTestTool("review-stubborn")
	release := make(chan struct{})
	tool.started = make(chan *tools.Request, 1)
	tool.behave = func(ctx context.Context, req *tools.Request) (*tools.Response, error) {
		<-release // ignores ctx
		return tools.JSON(200, map[string]any{"ok": true})
	}
	h := newHarness(t, storeEmbedded, []tools.Tool{tool})
	t.Cleanup(func() { close(release) }) // runs before srv.Close, which waits for the handler
	go func() { _, _ = h.try(callSpec{tool: "review-stubborn", session: "s", step: 1}) }()
	<-tool.started

	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		done <- h.gw.Drain(ctx)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Drain still blocked 10s after its 100ms deadline")
	}
}

// A Prefer: wait poller (the call runs on another replica) is not a tool in
// flight: a shutdown must end its wait (409) rather than let it poll on,
// and take the call over, after the drain gave up.
func TestReviewPreferWaitEndsWithDrain(t *testing.T) {
	tool := newTestTool("review-wait")
	h := newHarness(t, storeEmbedded, []tools.Tool{tool}, withLockTTL(30*time.Second))
	key := derivedKey(t, "s", 1, "review-wait", `{}`)
	canonical, err := keyderive.Canonicalize([]byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	// Another replica holds the call.
	if _, err := h.store.Claim(context.Background(), idempotency.ClaimRequest{
		Scope:       idempotency.Scope{Tenant: gateway.AnonymousTenant, Tool: "review-wait", Key: key},
		Fingerprint: keyderive.Fingerprint(canonical), Step: &idempotency.Step{SessionID: "s", Index: 1}, StepGuard: true,
		ExecutionID: "other-exec", Owner: "other-replica", LockTTL: 30 * time.Second, ReplayTTL: time.Hour,
		LeaseExpiry: idempotency.LeaseExpiryRerun,
	}); err != nil {
		t.Fatal(err)
	}

	clientCtx, hangUp := context.WithCancel(context.Background())
	defer hangUp() // lets the poller go if the test fails
	req, err := http.NewRequestWithContext(clientCtx, http.MethodPost, h.srv.URL+"/api/tools/v1/review-wait", bytes.NewBufferString(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Agent-Session-Id", "s")
	req.Header.Set("Agent-Step-Index", "1")
	req.Header.Set("Prefer", "wait=60")
	answered := make(chan int, 1)
	go func() {
		resp, err := h.client.Do(req)
		if err != nil {
			answered <- 0
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	time.Sleep(300 * time.Millisecond) // the poller is waiting

	// SIGTERM: Run shuts the HTTP server down, then drains, both bounded by
	// drain_timeout. By the time both gave up, the poller must have answered.
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_ = h.srv.Config.Shutdown(ctx)
	_ = h.gw.Drain(ctx)
	select {
	case status := <-answered:
		if status != http.StatusConflict {
			t.Fatalf("poller answered %d, want 409", status)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("a Prefer: wait poller still waits after the shutdown and drain timed out (it can still take the call over and run the tool with a cancelled context)")
	}
}
