package mcptool_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgateway/toolgateway/internal/mcptest"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/tools/mcptool"
	"github.com/toolgateway/toolgateway/wire"
)

func TestForwardsExactArgumentsAndIdentityMeta(t *testing.T) {
	up := newHTTPUpstream(t, mcptest.Options{})
	reg := tools.NewRegistry()
	startManager(t, reg, mcptool.ServerConfig{Name: "tickets", URL: up.http.URL, Prefix: "t_", RecordIsError: true}, mcptool.Options{})
	key := strings.Repeat("ab", 32)
	args := `{"title":"d\u00e9j\u00e0 vu","delay_ms":0}`
	resp, err := lookup(t, reg, "t_create_ticket").Tool.Call(context.Background(), &tools.Request{
		Arguments: json.RawMessage(args), Tenant: "acme", SessionID: "sess-1", StepIndex: 9007199254740991, HasStep: true,
		IdempotencyKey: key, ExecutionID: "01HZX3J5Q8W9VQ6M0N5E2R4T7Y", FencingToken: 7,
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != http.StatusOK || resp.ContentType != "application/json" {
		t.Fatalf("status %d, content type %q", resp.Status, resp.ContentType)
	}
	var result struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		StructuredContent map[string]any `json:"structuredContent"`
		IsError           bool           `json:"isError"`
	}
	if err := json.Unmarshal(resp.Body, &result); err != nil {
		t.Fatal(err)
	}
	if len(result.Content) != 1 || result.Content[0].Text != "created ticket 1: déjà vu" || result.StructuredContent["id"] != 1.0 {
		t.Fatalf("body = %s", resp.Body)
	}
	execs := up.srv.Executions(mcptest.ToolCreate)
	if len(execs) != 1 {
		t.Fatalf("%d executions, want 1", len(execs))
	}
	if string(execs[0].Arguments) != args {
		t.Fatalf("upstream got arguments %s, want %s", execs[0].Arguments, args)
	}
	meta := execs[0].Meta
	want := map[string]any{
		wire.MetaIdempotencyKey: tools.ScopedKey("acme", "t_create_ticket", key),
		wire.MetaTenant:         "acme",
		wire.MetaSessionID:      "sess-1",
		wire.MetaStepIndex:      9007199254740991.0,
		wire.MetaExecutionID:    "01HZX3J5Q8W9VQ6M0N5E2R4T7Y",
		wire.MetaFencingToken:   7.0,
	}
	for k, v := range want {
		if meta[k] != v {
			t.Errorf("_meta[%s] = %#v, want %#v", k, meta[k], v)
		}
	}
	if meta[wire.MetaIdempotencyKey] == key {
		t.Fatal("the client's key was forwarded unscoped")
	}
}

func TestOutcomeClasses(t *testing.T) {
	up := newHTTPUpstream(t, mcptest.Options{})
	reg := tools.NewRegistry()
	startManager(t, reg, mcptool.ServerConfig{Name: "rec", URL: up.http.URL, Prefix: "r_", RecordIsError: true, Policy: tools.Policy{Timeout: 300 * time.Millisecond}}, mcptool.Options{})
	// No keep-alive for this one: a request to the server once it is gone
	// is refused before anything is written. (On a kept-alive connection
	// the server closed, the request counts as written: an uncertain
	// outcome, see TestURLAnswerLostAfterTheServerActedIsUncertain.)
	noReuse := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	startManager(t, reg, mcptool.ServerConfig{Name: "norec", URL: up.http.URL, Prefix: "n_", RecordIsError: false}, mcptool.Options{HTTPClient: noReuse})
	req := func() *tools.Request {
		return &tools.Request{Arguments: json.RawMessage(`{"title":"slow","delay_ms":5000}`), Tenant: "acme"}
	}
	ctx := context.Background()

	resp, err := lookup(t, reg, "r_fail_tool").Tool.Call(ctx, req())
	if err != nil || resp.Status != 200 || !strings.Contains(string(resp.Body), `"isError":true`) {
		t.Fatalf("isError, record_is_error true: %v %+v", err, resp)
	}
	resp, err = lookup(t, reg, "n_fail_tool").Tool.Call(ctx, req())
	if err != nil || resp.Status != 500 || !strings.Contains(string(resp.Body), "title too long") {
		t.Fatalf("isError, record_is_error false: %v %+v, want status 500 with the result", err, resp)
	}
	_, err = lookup(t, reg, "r_fail_rpc").Tool.Call(ctx, req())
	// The server answered: said so (and with what), while it still counts
	// as unreachable for the gateway's outcome (released, not recorded).
	if !errors.Is(err, tools.ErrUpstreamRejected) || !errors.Is(err, tools.ErrUpstreamUnreachable) ||
		!strings.Contains(err.Error(), "upstream answered with an error, not a result: JSON-RPC error ") || !strings.Contains(err.Error(), "backend exploded") {
		t.Fatalf("JSON-RPC error: %v, want ErrUpstreamRejected naming the server's error", err)
	}
	_, err = lookup(t, reg, "r_create_ticket").Tool.Call(ctx, req())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow call past the timeout: %v, want a deadline error", err)
	}
	// The server goes away (its open streams first, or Close waits for them).
	up.http.CloseClientConnections()
	up.http.Close()
	_, err = lookup(t, reg, "n_create_ticket").Tool.Call(ctx, &tools.Request{Arguments: json.RawMessage(`{"title":"x"}`)})
	if !errors.Is(err, tools.ErrUpstreamUnreachable) {
		t.Fatalf("server gone: %v, want ErrUpstreamUnreachable", err)
	}
}

// TestForwardsTraceContextInMeta: the span of the call in ctx reaches the
// upstream as _meta.traceparent (the MCP convention); without a span
// nothing trace-related is added.
func TestForwardsTraceContextInMeta(t *testing.T) {
	up := newHTTPUpstream(t, mcptest.Options{})
	reg := tools.NewRegistry()
	startManager(t, reg, mcptool.ServerConfig{Name: "tickets", URL: up.http.URL, Prefix: "t_", RecordIsError: true}, mcptool.Options{})
	tool := lookup(t, reg, "t_create_ticket").Tool

	traceID, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	spanID, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ts, _ := trace.ParseTraceState("vendor=abc")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: spanID, TraceFlags: trace.FlagsSampled, TraceState: ts})
	traced := trace.ContextWithSpanContext(context.Background(), sc)

	if _, err := tool.Call(traced, &tools.Request{Arguments: json.RawMessage(`{"title":"traced"}`), Tenant: "acme"}); err != nil {
		t.Fatal(err)
	}
	if _, err := tool.Call(context.Background(), &tools.Request{Arguments: json.RawMessage(`{"title":"untraced"}`), Tenant: "acme"}); err != nil {
		t.Fatal(err)
	}
	execs := up.srv.Executions(mcptest.ToolCreate)
	if len(execs) != 2 {
		t.Fatalf("%d executions, want 2", len(execs))
	}
	if got, want := execs[0].Meta["traceparent"], "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"; got != want {
		t.Errorf("traced call: _meta.traceparent = %#v, want %q", got, want)
	}
	if got := execs[0].Meta["tracestate"]; got != "vendor=abc" {
		t.Errorf("traced call: _meta.tracestate = %#v, want \"vendor=abc\"", got)
	}
	for _, k := range []string{"traceparent", "tracestate"} {
		if v, ok := execs[1].Meta[k]; ok {
			t.Errorf("untraced call: _meta[%s] = %#v, want absent", k, v)
		}
	}
}

// TestInputRequiredIsPassedBackNotFulfilled: an upstream of protocol
// 2026-07-28 (go-sdk serves it statelessly) answers confirm_ticket with an
// input_required result. For a client that can answer it, the tool returns
// that result as a Response marked InputRequired (not an outcome); for one
// that cannot (REST), an error. The continuation (inputResponses and
// requestState) reaches the server, which then acts once.
func TestInputRequiredIsPassedBackNotFulfilled(t *testing.T) {
	t.Run("url", func(t *testing.T) {
		up := newHTTPUpstreamWith(t, mcptest.Options{}, &mcp.StreamableHTTPOptions{Stateless: true})
		reg := tools.NewRegistry()
		startManager(t, reg, mcptool.ServerConfig{Name: "r", URL: up.http.URL}, mcptool.Options{})
		inputRequiredRoundTrip(t, reg, func(event string) int { return len(mcptest.Filter(up.srv.All(), mcptest.ToolConfirm, event)) })
	})
	t.Run("stdio", func(t *testing.T) {
		logPath := filepath.Join(t.TempDir(), "execs.jsonl")
		reg := tools.NewRegistry()
		startManager(t, reg, mcptool.ServerConfig{Name: "local", Command: []string{stdioBinary(t), "-log", logPath}}, mcptool.Options{})
		inputRequiredRoundTrip(t, reg, func(event string) int { return len(mcptest.Filter(readLog(t, logPath), mcptest.ToolConfirm, event)) })
	})
}

// inputRequiredRoundTrip runs confirm_ticket's two rounds through reg;
// events counts the server's events of confirm_ticket.
func inputRequiredRoundTrip(t *testing.T, reg *tools.Registry, events func(event string) int) {
	t.Helper()
	confirm := lookup(t, reg, mcptest.ToolConfirm).Tool
	args := json.RawMessage(`{"title":"x"}`)

	resp, err := confirm.Call(context.Background(), &tools.Request{Arguments: args, AcceptsInputRequests: true})
	if err != nil || !resp.InputRequired || resp.Status != 200 {
		t.Fatalf("first round: %v %+v", err, resp)
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(resp.Body, &res); err != nil || !res.NeedsInput() || res.RequestState != mcptest.ConfirmState || res.InputRequests["confirm"] == nil {
		t.Fatalf("first round body %s: %v", resp.Body, err)
	}

	_, err = confirm.Call(context.Background(), &tools.Request{Arguments: args})
	if err == nil || errors.Is(err, tools.ErrOutcomeUncertain) || !strings.Contains(err.Error(), "client input") {
		t.Fatalf("a client that cannot answer: %v", err)
	}

	answers, _ := json.Marshal(mcp.InputResponseMap{"confirm": &mcp.ElicitResult{Action: "accept"}})
	resp, err = confirm.Call(context.Background(), &tools.Request{Arguments: args, AcceptsInputRequests: true,
		Continuation: &tools.Continuation{InputResponses: answers, RequestState: mcptest.ConfirmState}})
	if err != nil || resp.InputRequired || resp.Status != 200 || !strings.Contains(string(resp.Body), "created ticket 1: x") {
		t.Fatalf("continuation: %v %+v", err, resp)
	}
	if events("asked") != 2 || events("done") != 1 {
		t.Fatalf("asked %d, done %d: want 2 and 1", events("asked"), events("done"))
	}
}
