package gateway_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/redisstore"
	"github.com/toolgateway/toolgateway/internal/redistest"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// TestNewerStoreLayoutRunsNothing: a newer gateway raised the store's
// layout version (here: written by hand) while this one serves. Within
// idempotency.LayoutRefresh this gateway runs nothing more — not a new
// call, not a retry of one it ran — and answers 503 store_unavailable;
// /readyz answers 503 naming both versions.
func TestNewerStoreLayoutRunsNothing(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: redistest.Addr(t)})
	prefix := redistest.Prefix("gwtest")
	store := redisstore.New(client, redisstore.Options{Prefix: prefix})
	t.Cleanup(func() {
		redistest.CleanPrefix(context.Background(), client, prefix)
		_ = client.Close()
	})
	tool := newTestTool("provision")
	h := newHarness(t, storeRedis, []tools.Tool{tool}, withStore(store))
	first := callSpec{tool: "provision", session: "s", step: 1, args: `{"n":1}`}
	if r := h.do(first); r.status != 200 {
		t.Fatalf("before: %d %s", r.status, r.body)
	}
	version, err := store.LayoutVersion(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	newer := version.Known + 1
	if err := client.Set(t.Context(), prefix+"layout", newer, 0).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(idempotency.LayoutRefresh + 100*time.Millisecond)

	for _, c := range []callSpec{first, {tool: "provision", session: "s", step: 2, args: `{"n":2}`}} {
		r := h.do(c)
		wantProblem(t, r, 503, wire.CodeStoreUnavailable)
		if r.header.Get("Retry-After") == "" {
			t.Errorf("503 without Retry-After")
		}
	}
	if n := tool.total.Load(); n != 1 {
		t.Fatalf("tool ran %d times, want 1: nothing runs on a newer layout", n)
	}
	r := h.get("/readyz", "")
	p := wantProblem(t, r, 503, wire.CodeStoreUnavailable)
	detail, _ := p["detail"].(string)
	if !strings.Contains(detail, fmt.Sprintf("layout version %d, this gateway knows up to %d", newer, version.Known)) {
		t.Fatalf("/readyz detail %q does not name both versions", detail)
	}
}
