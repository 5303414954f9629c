package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/idempotency/redisstore"
	"github.com/toolgateway/toolgateway/internal/redistest"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

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

// TestMCPMetricsAndLog: MCP calls are counted and logged like REST calls,
// with api="mcp"; REST calls keep api="rest".
func TestMCPMetricsAndLog(t *testing.T) {
	logs := &lockedBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, nil))
	tool := newTestTool("provision")
	h := newHarness(t, storeEmbedded, []tools.Tool{tool}, withLogger(logger))
	cs := h.mcpSession(mcpClientOptions{})
	for range 2 {
		res, err := mcpCall(t, cs, "provision", `{}`, identityMeta("metrics", 0))
		if err != nil || res.IsError {
			t.Fatalf("call: %v", err)
		}
	}
	_, err := mcpCall(t, cs, "provision", `{}`, nil)
	wantRPCError(t, err, wire.RPCInvalidParams, wire.CodeAgentSessionMissing)
	_, err = mcpCall(t, cs, "nope", `{}`, identityMeta("metrics", 1))
	wantRPCError(t, err, wire.RPCInvalidParams, wire.CodeToolNotFound)
	if r := h.do(callSpec{tool: "provision", session: "metrics", step: 0, args: `{}`}); r.status != 200 {
		t.Fatalf("REST: %d", r.status)
	}

	for _, c := range []struct {
		api, tool, outcome string
		want               float64
	}{
		{"mcp", "provision", "executed", 1},
		{"mcp", "provision", "replayed", 1},
		{"mcp", "provision", "invalid", 1},
		{"mcp", "unknown", "not_found", 1},
		{"rest", "provision", "replayed", 1},
		{"rest", "provision", "executed", 0},
	} {
		if got := h.counterAPI(c.api, c.tool, c.outcome); got != c.want {
			t.Errorf("gateway_requests_total{api=%s,tool=%s,outcome=%s} = %v, want %v", c.api, c.tool, c.outcome, got, c.want)
		}
	}

	calls := map[string]int{}
	lines := bufio.NewScanner(strings.NewReader(logs.String()))
	for lines.Scan() {
		var l map[string]any
		if err := json.Unmarshal(lines.Bytes(), &l); err != nil {
			t.Fatalf("log line is not JSON: %s", lines.Text())
		}
		if l["msg"] != "request" {
			continue
		}
		if l["route"] == "/mcp" && l["api"] != "mcp" {
			t.Errorf("an /mcp request logged without api=mcp: %s", lines.Text())
		}
		if l["outcome"] != "other" {
			calls[l["api"].(string)+" "+l["outcome"].(string)]++
		}
	}
	for key, want := range map[string]int{"mcp executed": 1, "mcp replayed": 1, "mcp invalid": 1, "mcp not_found": 1, "rest replayed": 1} {
		if calls[key] != want {
			t.Errorf("log lines %q: %d, want %d (all: %v)", key, calls[key], want, calls)
		}
	}
}
