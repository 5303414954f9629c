package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/ratelimit"
	"github.com/toolgateway/toolgateway/internal/mcptest"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/tools/mcptool"
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

// TestMCPTracing: a call over /mcp with params._meta.traceparent continues
// that trace; the server span says api=mcp, and the trace reaches an MCP
// upstream tool's server in the forwarded _meta.traceparent.
func TestMCPTracing(t *testing.T) {
	up, err := mcptest.New(mcptest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	upHTTP := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up.MCP() }, nil))
	t.Cleanup(func() {
		upHTTP.CloseClientConnections()
		upHTTP.Close()
	})

	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	var mgr *mcptool.Manager
	h := newHarness(t, storeEmbedded, nil, func(o *gateway.Options) {
		o.TracerProvider = tp
		mgr, err = mcptool.NewManager(o.Tools, []mcptool.ServerConfig{{Name: "tickets", URL: upHTTP.URL, Prefix: "t_", RecordIsError: true}},
			mcptool.Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
	})
	t.Cleanup(func() { _ = mgr.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := mgr.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cs := h.mcpSession(mcpClientOptions{})

	const traceID, parentSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	meta := identityMeta("mcp-trace", 0)
	meta["traceparent"] = "00-" + traceID + "-" + parentSpan + "-01"
	res, err := mcpCall(t, cs, "t_create_ticket", `{"title":"traced"}`, meta)
	executionID := wantExecuted(t, res, err, false)

	var server, toolSpan sdktrace.ReadOnlySpan
	for _, s := range exporter.GetSpans().Snapshots() {
		switch s.Name() {
		case "call t_create_ticket":
			server = s
		case "tool t_create_ticket":
			toolSpan = s
		}
	}
	if server == nil || toolSpan == nil {
		t.Fatalf("no server or tool span; spans: %v", spanNames(exporter))
	}
	if server.SpanKind() != trace.SpanKindServer || server.SpanContext().TraceID().String() != traceID || server.Parent().SpanID().String() != parentSpan {
		t.Fatalf("server span: kind %v trace %s parent %s, want a server span continuing %s/%s",
			server.SpanKind(), server.SpanContext().TraceID(), server.Parent().SpanID(), traceID, parentSpan)
	}
	attrs := map[string]string{}
	for _, kv := range server.Attributes() {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	if attrs["toolgateway.api"] != "mcp" || attrs["toolgateway.tool"] != "t_create_ticket" || attrs["toolgateway.execution_id"] != executionID {
		t.Fatalf("server span attributes %v, want api=mcp, the tool and execution id %s", attrs, executionID)
	}
	execs := up.Executions(mcptest.ToolCreate)
	if len(execs) != 1 {
		t.Fatalf("%d upstream executions, want 1", len(execs))
	}
	got, _ := execs[0].Meta["traceparent"].(string)
	if want := "00-" + traceID + "-" + toolSpan.SpanContext().SpanID().String() + "-01"; got != want {
		t.Fatalf("upstream _meta.traceparent = %q, want %q (the trace, parented by the tool span)", got, want)
	}
	raw, _ := json.Marshal(execs[0].Meta)
	if strings.Contains(string(raw), parentSpan) {
		t.Fatalf("the upstream got the caller's span as parent rather than the gateway's: %s", raw)
	}
}

func spanNames(e *tracetest.InMemoryExporter) []string {
	var out []string
	for _, s := range e.GetSpans().Snapshots() {
		out = append(out, s.Name())
	}
	return out
}
