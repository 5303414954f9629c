package gateway_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/internal/mcptest"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/tools/httptool"
	"github.com/toolgateway/toolgateway/tools/mcptool"
)

// otlpReceiver is an OTLP/HTTP trace receiver speaking the collector's
// wire format: POST /v1/traces with a protobuf ExportTraceServiceRequest.
type otlpReceiver struct {
	mu    sync.Mutex
	raw   [][]byte
	spans []*tracepb.Span
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "bad export", http.StatusBadRequest)
		return
	}
	var req coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	o.raw = append(o.raw, body)
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			o.spans = append(o.spans, ss.GetSpans()...)
		}
	}
	o.mu.Unlock()
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// TestTracingReachesCollectorAndUpstream calls an HTTP upstream tool with
// a traceparent and exports through the real OTLP/HTTP exporter to a
// receiver: the server span continues the caller's trace, the store
// decision, tool and completion spans are its children, the upstream gets
// a traceparent of the same trace, and no secret is in the exported bytes.
func TestTracingReachesCollectorAndUpstream(t *testing.T) {
	receiver := &otlpReceiver{}
	collector := httptest.NewServer(receiver)
	defer collector.Close()
	exporter, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(collector.URL+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter))

	upstreamTrace := make(chan string, 1)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upstreamTrace <- r.Header.Get("Traceparent")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	defer upstream.Close()
	tool, err := httptool.New(httptool.Config{Name: "provision", URL: upstream.URL})
	if err != nil {
		t.Fatal(err)
	}
	const token = "tok-secret-acme-7f3a"
	h := newHarness(t, storeRedis, []tools.Tool{tool}, withTenants(map[string]string{"acme": token}),
		func(o *callpath.Options) { o.TracerProvider = tp })

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	args := `{"secret_argument":"arg-value-9c1d"}`
	key := derivedKey(t, "trace-session", 3, "provision", args)
	r := h.do(callSpec{tool: "provision", session: "trace-session", step: 3, args: args, token: token,
		headers: map[string]string{"Traceparent": "00-" + traceID + "-00f067aa0ba902b7-01"}})
	if r.status != http.StatusOK {
		t.Fatalf("call: %d: %s", r.status, r.body)
	}
	got := <-upstreamTrace
	if !strings.HasPrefix(got, "00-"+traceID+"-") {
		t.Fatalf("upstream traceparent %q, want trace %s", got, traceID)
	}
	if err := tp.Shutdown(context.Background()); err != nil { // flushes
		t.Fatal(err)
	}

	receiver.mu.Lock()
	defer receiver.mu.Unlock()
	byName := map[string]*tracepb.Span{}
	for _, sp := range receiver.spans {
		if hex.EncodeToString(sp.GetTraceId()) != traceID {
			t.Errorf("span %q in trace %x, want %s", sp.GetName(), sp.GetTraceId(), traceID)
		}
		byName[sp.GetName()] = sp
	}
	server := byName["call provision"]
	if server == nil || server.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
		t.Fatalf("no server span; spans: %v", names(receiver.spans))
	}
	if hex.EncodeToString(server.GetParentSpanId()) != "00f067aa0ba902b7" {
		t.Fatalf("server span's parent %x, want the caller's span", server.GetParentSpanId())
	}
	for _, child := range []string{"store decision", "tool provision", "completion"} {
		sp := byName[child]
		if sp == nil || !bytes.Equal(sp.GetParentSpanId(), server.GetSpanId()) {
			t.Fatalf("span %q missing or not a child of the server span; spans: %v", child, names(receiver.spans))
		}
	}
	if !strings.Contains(got, hex.EncodeToString(byName["tool provision"].GetSpanId())) {
		t.Fatalf("upstream's parent span %q is not the tool span", got)
	}
	attrs := map[string]string{}
	for _, kv := range server.GetAttributes() {
		attrs[kv.GetKey()] = kv.GetValue().String()
	}
	for _, k := range []string{"toolgateway.tool", "toolgateway.api", "toolgateway.outcome", "toolgateway.replayed", "toolgateway.tenant", "toolgateway.execution_id"} {
		if attrs[k] == "" {
			t.Errorf("server span lacks %s: %v", k, attrs)
		}
	}
	if !strings.Contains(attrs["toolgateway.execution_id"], r.header.Get("Tool-Execution-Id")) {
		t.Errorf("execution id %v, response says %s", attrs["toolgateway.execution_id"], r.header.Get("Tool-Execution-Id"))
	}
	all := bytes.Join(receiver.raw, nil)
	for what, secret := range map[string]string{"full key": key, "bearer token": token, "argument value": "arg-value-9c1d", "argument name": "secret_argument"} {
		if bytes.Contains(all, []byte(secret)) {
			t.Errorf("the %s is in the exported spans", what)
		}
	}
}

func names(spans []*tracepb.Span) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.GetName())
	}
	return out
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
	h := newHarness(t, storeEmbedded, nil, func(o *callpath.Options) {
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
