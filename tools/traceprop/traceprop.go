// Package traceprop carries the W3C trace context of a tool call to the
// tool's upstream: as traceparent/tracestate headers to an HTTP upstream,
// and as the "traceparent"/"tracestate" members of an MCP request's _meta
// (the MCP convention for trace context). The gateway puts the span of the
// tool's execution in the context it passes to Tool.Call; without tracing
// there is none and nothing is added.
package traceprop

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
)

// w3c is stateless, so no global propagator is needed.
var w3c propagation.TraceContext

// InjectHTTP sets traceparent (and tracestate) on h from ctx's span.
func InjectHTTP(ctx context.Context, h http.Header) {
	w3c.Inject(ctx, propagation.HeaderCarrier(h))
}

// InjectMeta adds "traceparent" (and "tracestate") to an MCP request's
// _meta from ctx's span; meta must not be nil.
func InjectMeta(ctx context.Context, meta map[string]any) {
	carrier := propagation.MapCarrier{}
	w3c.Inject(ctx, carrier)
	for k, v := range carrier {
		meta[k] = v
	}
}
