package callpath

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Tracing (docs/operations.md, "Tracing"): extractTrace continues an
// incoming W3C traceparent; Engine.Call makes one server span per call,
// with child spans for the store decision, the tool and the completion;
// the tool's span goes to the tool in its context, and tools/traceprop
// hands it on to HTTP and MCP upstreams. Attributes never hold the full
// key, a token or the arguments (a key prefix at most). Without
// Options.TracerProvider every helper here returns at once: tracing off
// costs a nil check.

// tracerName names the gateway's instrumentation scope.
const tracerName = "github.com/toolgateway/toolgateway/gateway"

// w3c is the W3C Trace Context propagator (stateless).
var w3c propagation.TraceContext

// extractTrace puts the caller's trace context (traceparent, tracestate)
// into the request's context, so the call's span continues its trace.
func (s *Engine) extractTrace(next http.Handler) http.Handler {
	if s.tracer == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := w3c.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// startCallSpan starts the server span of a call; end records its outcome.
func (s *Engine) startCallSpan(ctx context.Context, c *Call) (context.Context, func(Result)) {
	if s.tracer == nil {
		return ctx, func(Result) {}
	}
	if c.Traceparent != "" {
		ctx = w3c.Extract(ctx, propagation.MapCarrier{"traceparent": c.Traceparent, "tracestate": c.Tracestate})
	}
	ctx, span := s.tracer.Start(ctx, "call "+c.Entry.Spec.Name, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			attribute.String("toolgateway.tool", c.Entry.Spec.Name),
			attribute.String("toolgateway.api", string(c.API)),
			attribute.String("toolgateway.tenant", c.Tenant),
		))
	return ctx, func(res Result) {
		attrs := []attribute.KeyValue{
			attribute.String("toolgateway.outcome", res.Label),
			attribute.Bool("toolgateway.replayed", res.Replayed),
		}
		if res.ExecutionID != "" {
			attrs = append(attrs, attribute.String("toolgateway.execution_id", res.ExecutionID))
		}
		if info := infoFrom(ctx); info != nil && info.keyPrefix != "" {
			attrs = append(attrs, attribute.String("toolgateway.key_prefix", info.keyPrefix))
		}
		if res.Problem != nil {
			attrs = append(attrs, attribute.String("toolgateway.problem", res.Problem.Code))
			if res.Problem.Status >= 500 {
				span.SetStatus(codes.Error, res.Problem.Code)
			}
		} else if res.Status >= 500 {
			span.SetStatus(codes.Error, "tool answered "+http.StatusText(res.Status))
		}
		span.SetAttributes(attrs...)
		span.End()
	}
}

// childSpan starts a child span of the call's span (store decision,
// completion); end ends it, marking an error.
func (s *Engine) childSpan(ctx context.Context, name string) (context.Context, func(error)) {
	if s.tracer == nil {
		return ctx, func(error) {}
	}
	ctx, span := s.tracer.Start(ctx, name)
	return ctx, func(err error) {
		if err != nil {
			span.SetStatus(codes.Error, "failed") // the error text may hold store details; not exported
		}
		span.End()
	}
}

// toolSpan starts the span of the tool's execution as a child of the
// call's span (in reqCtx) and puts it into toolCtx, which is detached from
// the request, so the tool and its upstream see the trace.
func (s *Engine) toolSpan(reqCtx, toolCtx context.Context, tool string) (context.Context, func(error)) {
	if s.tracer == nil {
		return toolCtx, func(error) {}
	}
	_, span := s.tracer.Start(reqCtx, "tool "+tool, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("toolgateway.tool", tool)))
	return trace.ContextWithSpan(toolCtx, span), func(err error) {
		if err != nil {
			span.SetStatus(codes.Error, "tool failed")
		}
		span.End()
	}
}
