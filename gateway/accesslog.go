package gateway

import (
	"context"
	"log/slog"
	"net/http"
	"time"
)

// Outcomes, the values of the "outcome" label and log field. The set is
// fixed so no label value ever comes from user input.
const (
	outcomeExecuted       = "executed"
	outcomeReplayed       = "replayed"
	outcomeInProgress     = "in_progress"
	outcomeKeyReused      = "key_reused"
	outcomeKeyMismatch    = "key_mismatch"
	outcomeStepConflict   = "step_conflict"
	outcomeOutcomeUnknown = "outcome_unknown"
	outcomeInvalid        = "invalid"
	outcomeUnauthorized   = "unauthorized"
	outcomeNotFound       = "not_found"
	outcomeToolError      = "tool_error"
	outcomeStoreError     = "store_error"
	outcomeOther          = "other"
)

// requestInfo collects what the handlers learn about a request, for the one
// log line and the metrics written when it ends.
type requestInfo struct {
	tool      string // a configured tool name, or "" (→ "unknown")
	tenant    string
	keyPrefix string
	outcome   string
	route     string // set by handlers whose pattern is fixed; "" asks chi
	api       API    // the door of a tool call ("" for other requests)
	start     time.Time
	// counted: the call path already observed the request metrics.
	counted bool
}

type requestInfoKey struct{}

func infoFrom(ctx context.Context) *requestInfo {
	info, _ := ctx.Value(requestInfoKey{}).(*requestInfo)
	return info
}

// setOutcome records the tool (when known) and the outcome of the request.
func setOutcome(ctx context.Context, tool, outcome string) {
	if info := infoFrom(ctx); info != nil {
		if tool != "" {
			info.tool = tool
		}
		info.outcome = outcome
	}
}

// setAPI records the door a tool call came in by.
func setAPI(ctx context.Context, api API) {
	if info := infoFrom(ctx); info != nil {
		info.api = api
	}
}

// markCounted notes that the call path observed the request metrics, so the
// access log does not count the request a second time.
func markCounted(ctx context.Context) {
	if info := infoFrom(ctx); info != nil {
		info.counted = true
	}
}

// requestStart returns when the request arrived (zero outside a request).
func requestStart(ctx context.Context) time.Time {
	if info := infoFrom(ctx); info != nil {
		return info.start
	}
	return time.Time{}
}

func setTenant(ctx context.Context, tenant string) {
	if info := infoFrom(ctx); info != nil {
		info.tenant = tenant
	}
}

// setKey records the first characters of the key: enough to correlate log
// lines, never the whole key (a key can be replayed by whoever reads it).
func setKey(ctx context.Context, key string) {
	if info := infoFrom(ctx); info != nil {
		info.keyPrefix = key[:min(len(key), 8)]
	}
}

// statusRecorder remembers the status written.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// accessLog writes one structured line per request and the request metrics.
func (s *Server) accessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		info := &requestInfo{start: start}
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), requestInfoKey{}, info)))
		elapsed := time.Since(start)

		tool := info.tool
		if tool == "" {
			tool = "unknown"
		}
		outcome := info.outcome
		if outcome == "" {
			outcome = outcomeOther
		}
		tenant := info.tenant
		if tenant == "" {
			tenant = AnonymousTenant
		}
		if info.outcome != "" && !info.counted {
			// Only tool API calls count as requests; health checks and
			// scrapes would drown the series.
			s.metrics.observeRequest(tool, outcome, elapsed)
		}
		route := info.route
		if route == "" {
			route = routeOf(r)
		}
		attrs := []slog.Attr{
			slog.String("request_id", RequestIDFrom(r.Context())),
			slog.String("method", r.Method),
			slog.String("route", route),
			slog.String("tenant", tenant),
			slog.String("tool", tool),
			slog.String("key_prefix", info.keyPrefix),
			slog.String("outcome", outcome),
			slog.Int("status", rec.status),
			durationAttr("duration_ms", elapsed),
		}
		if info.api != "" {
			attrs = append(attrs, slog.String("api", string(info.api)))
		}
		s.log.LogAttrs(r.Context(), levelFor(rec.status), "request", attrs...)
	})
}
