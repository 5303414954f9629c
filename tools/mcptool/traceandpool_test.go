package mcptool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/toolgateway/toolgateway/internal/mcptest"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/tools/mcptool"
)

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

// TestPoolOpensAtMostItsSizeOfSessions: many calls, some concurrent, are
// carried by the pool's sessions, never a session per call.
func TestPoolOpensAtMostItsSizeOfSessions(t *testing.T) {
	const poolSize, sequential, concurrent = 3, 20, 30
	up := newHTTPUpstream(t, mcptest.Options{})
	reg := tools.NewRegistry()
	startManager(t, reg, mcptool.ServerConfig{Name: "tickets", URL: up.http.URL, Prefix: "t_", Sessions: poolSize, RecordIsError: true}, mcptool.Options{})
	tool := lookup(t, reg, "t_create_ticket").Tool
	// Every slot connects at start; wait for them so a late handshake is
	// not mistaken for a session opened by a call.
	waitFor(t, "the pool's sessions", func() bool { return up.srv.Initialized() >= poolSize })
	before := up.srv.Initialized()

	call := func(i int) error {
		resp, err := tool.Call(context.Background(), &tools.Request{Arguments: json.RawMessage(fmt.Sprintf(`{"title":"t%d","delay_ms":20}`, i)), Tenant: "acme"})
		if err != nil {
			return err
		}
		if resp.Status != http.StatusOK {
			return fmt.Errorf("call %d: status %d", i, resp.Status)
		}
		return nil
	}
	for i := range sequential {
		if err := call(i); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, concurrent)
	for i := range concurrent {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- call(sequential + i)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := len(up.srv.Executions(mcptest.ToolCreate)); n != sequential+concurrent {
		t.Fatalf("%d executions, want %d", n, sequential+concurrent)
	}
	if before != poolSize {
		t.Errorf("%d sessions initialized at start, want the pool size %d", before, poolSize)
	}
	if after := up.srv.Initialized(); after != before {
		t.Errorf("%d calls opened %d more sessions (%d in all), want none beyond the pool's %d", sequential+concurrent, after-before, after, poolSize)
	}
}
