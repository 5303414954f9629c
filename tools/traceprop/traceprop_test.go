package traceprop_test

import (
	"context"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/toolgateway/toolgateway/tools/traceprop"
)

func TestInjectCarriesTheSpanOrNothing(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	const want = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

	h := http.Header{}
	traceprop.InjectHTTP(ctx, h)
	if got := h.Get("Traceparent"); got != want {
		t.Fatalf("header traceparent %q, want %q", got, want)
	}
	meta := map[string]any{"io.github.toolgateway/tenant": "acme"}
	traceprop.InjectMeta(ctx, meta)
	if meta["traceparent"] != want || meta["io.github.toolgateway/tenant"] != "acme" {
		t.Fatalf("meta %v", meta)
	}

	// Tracing off: no span, nothing added.
	h, meta = http.Header{}, map[string]any{}
	traceprop.InjectHTTP(context.Background(), h)
	traceprop.InjectMeta(context.Background(), meta)
	if len(h) != 0 || len(meta) != 0 {
		t.Fatalf("without a span: header %v, meta %v", h, meta)
	}
}
