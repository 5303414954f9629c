package gateway_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/redisstore"
	"github.com/toolgateway/toolgateway/internal/redistest"
	"github.com/toolgateway/toolgateway/internal/testutil"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// TestRedisDownAndBack kills a real redis-server under the gateway: calls
// get 503 store_unavailable and nothing runs; /readyz says 503; after the
// restart the same gateway serves again without being restarted itself.
func TestRedisDownAndBack(t *testing.T) {
	srv := redistest.Start(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: 1})
	t.Cleanup(func() { _ = client.Close() })
	store := redisstore.New(client, redisstore.Options{Prefix: "gw:"})
	tool := newTestTool("provision")
	h := newHarness(t, storeRedis, []tools.Tool{tool}, withStore(store))

	if r := h.do(callSpec{tool: "provision", session: "s", step: 1, args: `{}`}); r.status != 200 {
		t.Fatalf("before: %d %s", r.status, r.body)
	}
	srv.Kill()
	for i := 2; i < 5; i++ {
		r := h.do(callSpec{tool: "provision", session: "s", step: uint64(i), args: `{}`})
		p := wantProblem(t, r, 503, wire.CodeStoreUnavailable)
		if r.header.Get("Retry-After") == "" || p["retryable"] != true {
			t.Fatalf("503 without Retry-After/retryable: %v", r.header)
		}
	}
	if r := h.get("/readyz", ""); r.status != 503 {
		t.Fatalf("/readyz while Redis is down: %d", r.status)
	}
	if r := h.get("/healthz", ""); r.status != 200 {
		t.Fatalf("/healthz while Redis is down: %d", r.status)
	}
	if n := tool.total.Load(); n != 1 {
		t.Fatalf("tool ran %d times; it must not run while Redis is down", n)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5e9, "the gateway to serve again", func() bool {
		return client.Ping(context.Background()).Err() == nil
	})
	if r := h.do(callSpec{tool: "provision", session: "s", step: 2, args: `{}`}); r.status != 200 {
		t.Fatalf("after restart: %d %s", r.status, r.body)
	}
	if r := h.get("/readyz", ""); r.status != 200 {
		t.Fatalf("/readyz after restart: %d", r.status)
	}
	if h.counter("provision", "store_error") != 3 {
		t.Fatalf("store_error count = %v, want 3", h.counter("provision", "store_error"))
	}
}

// hangingPingStore is a store whose Ping hangs until its context ends
// while down (a Redis that does not answer), recording the deadline each
// ping was given.
type hangingPingStore struct {
	idempotency.Store
	down      atomic.Bool
	mu        sync.Mutex
	deadlines []time.Duration
}

func (s *hangingPingStore) Ping(ctx context.Context) error {
	if deadline, ok := ctx.Deadline(); ok {
		s.mu.Lock()
		s.deadlines = append(s.deadlines, time.Until(deadline))
		s.mu.Unlock()
	} else {
		s.mu.Lock()
		s.deadlines = append(s.deadlines, time.Hour)
		s.mu.Unlock()
	}
	if !s.down.Load() {
		return nil
	}
	<-ctx.Done()
	return errors.New("ping: " + ctx.Err().Error())
}

// /readyz bounds its store ping to 500 ms (Kubernetes' default probe
// timeout is 1 s), and logs one line per change of state, not one per
// probe.
func TestReadyzIsBoundedAndLogsStateChanges(t *testing.T) {
	store := &hangingPingStore{Store: newStore(t, storeEmbedded)}
	logs := &testutil.LockedBuffer{}
	h := newHarness(t, storeEmbedded, []tools.Tool{newTestTool("echo")}, withStore(store), withLogger(slog.New(slog.NewJSONHandler(logs, nil))))
	store.down.Store(true)
	for range 3 {
		if r := h.get("/readyz", ""); r.status != 503 {
			t.Fatalf("/readyz with the store hanging: %d", r.status)
		}
	}
	store.mu.Lock()
	for _, d := range store.deadlines {
		if d > 500*time.Millisecond {
			t.Fatalf("a readiness ping was allowed %v, want at most 500ms", d)
		}
	}
	store.mu.Unlock()
	if n := strings.Count(logs.String(), "not ready"); n != 1 {
		t.Fatalf("%d 'not ready' lines for three failed probes, want 1:\n%s", n, logs.String())
	}
	store.down.Store(false)
	for range 3 {
		if r := h.get("/readyz", ""); r.status != 200 {
			t.Fatalf("/readyz with the store back: %d", r.status)
		}
	}
	if n := strings.Count(logs.String(), "ready again"); n != 1 {
		t.Fatalf("%d 'ready again' lines, want 1", n)
	}
}

// TestMCPStoreDown kills a real redis-server under the gateway: tools/call
// gets -32003 store_unavailable, retryable, and nothing runs; once Redis is
// back the same call runs.
func TestMCPStoreDown(t *testing.T) {
	srv := redistest.Start(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: 1})
	t.Cleanup(func() { _ = client.Close() })
	store := redisstore.New(client, redisstore.Options{Prefix: "gw:"})
	tool := newTestTool("provision")
	h := newHarness(t, storeRedis, []tools.Tool{tool}, withStore(store))
	cs := h.mcpSession(mcpClientOptions{})

	res, err := mcpCall(t, cs, "provision", `{}`, identityMeta("down", 0))
	wantExecuted(t, res, err, false)
	srv.Kill()
	// On the wire (what every client reads): -32003 with the contract's data.
	r := h.rawMCP(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"provision","arguments":{},"_meta":{"io.github.toolgateway/sessionId":"down","io.github.toolgateway/stepIndex":1}}}`,
		"2025-11-25", nil)
	code, data := rpcErrorOf(t, r)
	if code != wire.RPCStoreUnavailable || data["code"] != wire.CodeStoreUnavailable || data["retryable"] != true || data["retry_after_ms"] != 1000.0 {
		t.Fatalf("store down: %d %s", r.status, r.body)
	}
	// go-sdk's client (v1.8.0) reads -32003, which its jsonrpc2 package
	// also uses for "client is closing", as ErrConnectionClosed; the
	// message still says what happened, and the session stays usable.
	_, err = mcpCall(t, cs, "provision", `{}`, identityMeta("down", 2))
	if !errors.Is(err, mcp.ErrConnectionClosed) || !strings.Contains(err.Error(), "the tool was not run") {
		t.Fatalf("go-sdk client, store down: %v", err)
	}
	if n := tool.total.Load(); n != 1 {
		t.Fatalf("tool ran %d times; it must not run while the store is down", n)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5e9, "Redis to answer", func() bool { return client.Ping(context.Background()).Err() == nil })
	res, err = mcpCall(t, cs, "provision", `{}`, identityMeta("down", 1))
	wantExecuted(t, res, err, false)
	res, err = mcpCall(t, cs, "provision", `{}`, identityMeta("down", 2))
	wantExecuted(t, res, err, false)
	if got := h.counterAPI("mcp", "provision", "store_error"); got != 2 {
		t.Fatalf("store_error{api=mcp} = %v, want 2", got)
	}
}

func TestStoreDownFailsClosed(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		tool := newTestTool("provision")
		hs := &hookStore{Store: newStore(t, kind)}
		h := newHarness(t, kind, []tools.Tool{tool}, withStore(hs))
		hs.down.Store(true)
		r := h.do(callSpec{tool: "provision", session: "down", step: 1, args: `{}`})
		p := wantProblem(t, r, 503, wire.CodeStoreUnavailable)
		if r.header.Get("Retry-After") == "" || p["retryable"] != true {
			t.Fatalf("503 needs Retry-After and retryable: %v", r.header)
		}
		if tool.total.Load() != 0 {
			t.Fatal("the tool ran while the store was down")
		}
		hs.down.Store(false)
		if r := h.do(callSpec{tool: "provision", session: "down", step: 1, args: `{}`}); r.status != 200 {
			t.Fatalf("after recovery: %d %s", r.status, r.body)
		}
	})
}
