package gateway_test

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/keyderive"
	"github.com/toolgateway/toolgateway/tools"
)

// Drain is the contract's "bounded drain": once its context ends it must
// return, even if a tool ignores the cancellation.
func TestDrainBoundedWithToolIgnoringCancellation(t *testing.T) {
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
func TestPreferWaitEndsWithDrain(t *testing.T) {
	tool := newTestTool("review-wait")
	h := newHarness(t, storeEmbedded, []tools.Tool{tool}, withLockTTL(30*time.Second))
	key := derivedKey(t, "s", 1, "review-wait", `{}`)
	canonical, err := keyderive.Canonicalize([]byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	// Another replica holds the call.
	if _, err := h.store.Claim(context.Background(), idempotency.ClaimRequest{
		Scope:       idempotency.Scope{Tenant: callpath.AnonymousTenant, Tool: "review-wait", Key: key},
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
