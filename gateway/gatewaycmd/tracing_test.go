package gatewaycmd

import (
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/toolgateway/toolgateway/keyderive"
)

// TestTracingEndpointExportsAndShutdownFlushes runs the gateway with
// tracing.endpoint at an OTLP/HTTP receiver, makes one call with a
// traceparent and stops the gateway: the spans of the call, in the
// caller's trace, reach the receiver by the time Run returns.
func TestTracingEndpointExportsAndShutdownFlushes(t *testing.T) {
	var mu sync.Mutex
	traces := map[string]int{}
	services := map[string]bool{}
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req coltrace.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, rs := range req.GetResourceSpans() {
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.GetKey() == "service.name" {
					services[kv.GetValue().GetStringValue()] = true
				}
			}
			for _, ss := range rs.GetScopeSpans() {
				for _, sp := range ss.GetSpans() {
					traces[hex.EncodeToString(sp.GetTraceId())]++
				}
			}
		}
	}))
	defer collector.Close()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	defer upstream.Close()

	g := startGateway(t, "listen: 127.0.0.1:0\nstore:\n  path: "+t.TempDir()+"/gw.db\ntracing:\n  endpoint: "+collector.URL+"\n  service_name: gw-test\n"+
		"tools:\n  - name: up\n    http:\n      url: "+upstream.URL+"\n")
	args := `{"a":1}`
	key, _ := keyderive.Key("s", 0, "up", []byte(args))
	req, _ := http.NewRequest(http.MethodPost, "http://"+g.addr+"/api/tools/v1/up", strings.NewReader(args))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Agent-Session-Id", "s")
	req.Header.Set("Agent-Step-Index", "0")
	const traceID = "0af7651916cd43dd8448eb211c80319c"
	req.Header.Set("Traceparent", "00-"+traceID+"-b7ad6b7169203331-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("call: %d", resp.StatusCode)
	}
	g.cancel()
	err = <-g.done
	g.done <- err // for the cleanup
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if traces[traceID] < 4 { // the call, the store decision, the tool, the completion
		t.Fatalf("spans by trace: %v; want the call's 4 spans in %s", traces, traceID)
	}
	if !services["gw-test"] {
		t.Fatalf("service.name %v, want gw-test", services)
	}
}

// TestTracingEndpointSources: off without an endpoint; the OTEL_* variables
// override tracing.endpoint; a bad URL names its source.
func TestTracingEndpointSources(t *testing.T) {
	cfg := &Config{}
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	if u, err := cfg.tracesURL(getenv); u != "" || err != nil {
		t.Fatalf("no endpoint: %q %v, want off", u, err)
	}
	cfg.Tracing.Endpoint = "http://file:4318/"
	if u, _ := cfg.tracesURL(getenv); u != "http://file:4318/v1/traces" {
		t.Fatalf("file: %q", u)
	}
	env[envOTLPEndpoint] = "http://env:4318"
	if u, _ := cfg.tracesURL(getenv); u != "http://env:4318/v1/traces" {
		t.Fatalf("env base: %q", u)
	}
	env[envOTLPTracesEndpoint] = "https://env:4318/custom"
	if u, _ := cfg.tracesURL(getenv); u != "https://env:4318/custom" {
		t.Fatalf("env traces: %q", u)
	}
	env = map[string]string{}
	cfg.Tracing.Endpoint = "collector:4318"
	if _, err := cfg.tracesURL(getenv); err == nil || !strings.Contains(err.Error(), "tracing.endpoint") {
		t.Fatalf("bad endpoint: %v", err)
	}
}
