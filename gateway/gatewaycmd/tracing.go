package gatewaycmd

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"

	"github.com/toolgateway/toolgateway/gateway/buildinfo"
)

// TracingConfig turns OpenTelemetry tracing on (docs/operations.md,
// "Tracing"). Tracing is off unless an endpoint is set here or in
// OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_TRACES_ENDPOINT.
type TracingConfig struct {
	// Endpoint is the OTLP/HTTP base URL of a collector, e.g.
	// http://otel-collector:4318; spans go to <endpoint>/v1/traces.
	Endpoint string `yaml:"endpoint"`
	// ServiceName is service.name (default "toolgateway").
	ServiceName string `yaml:"service_name"`
	// SampleRatio samples new traces (0..1, default 1); a caller's
	// sampled flag is followed.
	SampleRatio *float64 `yaml:"sample_ratio"`
}

// The environment variables of the OpenTelemetry specification that turn
// tracing on; like the gateway's other variables, they override the file.
const (
	envOTLPEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envOTLPTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envOTELServiceName    = "OTEL_SERVICE_NAME"
)

// tracesURL is where spans go, or "" when tracing is off.
func (c *Config) tracesURL(getenv func(string) string) (string, error) {
	base, field := c.Tracing.Endpoint, "tracing.endpoint"
	full := ""
	if v := getenv(envOTLPEndpoint); v != "" {
		base, field = v, envOTLPEndpoint
	}
	if v := getenv(envOTLPTracesEndpoint); v != "" {
		full, field = v, envOTLPTracesEndpoint
	}
	if full == "" && base == "" {
		return "", nil
	}
	if full == "" {
		full = strings.TrimSuffix(base, "/") + "/v1/traces"
	}
	u, err := url.Parse(full)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%s: %q: want an http(s) URL of an OTLP/HTTP collector", field, full)
	}
	return full, nil
}

// tracingSettings checks the tracing section and its variables: the
// traces URL ("" when tracing is off) and the sample ratio.
func (c *Config) tracingSettings(getenv func(string) string) (endpoint string, ratio float64, err error) {
	endpoint, err = c.tracesURL(getenv)
	if err != nil {
		return "", 0, err
	}
	ratio = 1.0
	if c.Tracing.SampleRatio != nil {
		ratio = *c.Tracing.SampleRatio
		if ratio < 0 || ratio > 1 {
			return "", 0, fmt.Errorf("tracing.sample_ratio: %v: want 0 to 1", ratio)
		}
	}
	return endpoint, ratio, nil
}

// tracerProvider builds the OTLP/HTTP exporting provider, or nil when
// tracing is off. Its Shutdown flushes the spans still buffered.
func (c *Config) tracerProvider(ctx context.Context, getenv func(string) string) (*sdktrace.TracerProvider, error) {
	endpoint, ratio, err := c.tracingSettings(getenv)
	if err != nil || endpoint == "" {
		return nil, err
	}
	exporter, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint))
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	name := orString(getenv(envOTELServiceName), orString(c.Tracing.ServiceName, "toolgateway"))
	res := resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName(name), semconv.ServiceVersion(buildinfo.Version()))
	return sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exporter),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))),
	), nil
}
