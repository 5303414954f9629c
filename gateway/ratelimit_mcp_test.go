package gateway_test

import (
	"errors"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/ratelimit"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// TestMCPRateLimited: a tenant over its rate gets, over MCP, the dedicated
// JSON-RPC error -32029 with data.code rate_limited, retryable and
// retry_after_ms (not -32602, which says the params are wrong); the tool
// does not run for the refused call.
func TestMCPRateLimited(t *testing.T) {
	tool := newTestTool("provision")
	h := newHarness(t, storeEmbedded, []tools.Tool{tool},
		withTenants(map[string]string{limitedTenant: limitedToken}),
		withTenantLimits(limitedTenant, gateway.TenantLimits{Rate: ratelimit.Limit{Rate: 1, Period: time.Minute, Burst: 1}}))
	cs := h.mcpSession(mcpClientOptions{token: limitedToken})

	res, err := mcpCall(t, cs, "provision", `{}`, identityMeta("rl", 0))
	wantExecuted(t, res, err, false)
	_, err = mcpCall(t, cs, "provision", `{}`, identityMeta("rl", 1))
	data := wantRPCError(t, err, wire.RPCRateLimited, wire.CodeRateLimited)
	if data["retryable"] != true {
		t.Fatalf("rate_limited over MCP must be retryable: %v", data)
	}
	ms, ok := data["retry_after_ms"].(float64)
	if !ok || ms < 1000 || ms != float64(int64(ms)) {
		t.Fatalf("data.retry_after_ms = %#v, want whole milliseconds >= 1000 (REST's Retry-After in seconds)", data["retry_after_ms"])
	}
	if n := tool.total.Load(); n != 1 {
		t.Fatalf("the tool ran %d times, want 1 (the limited call must not run)", n)
	}
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) && rpcErr.Code == wire.RPCInvalidParams {
		t.Fatal("rate_limited is answered as invalid params")
	}
}
