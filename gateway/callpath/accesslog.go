package callpath

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
)

// accessLog writes one structured line per request and the request metrics.
func (s *Engine) accessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := infoFrom(r.Context()) // requestID's
		if info == nil {
			info = &requestInfo{start: time.Now()}
			r = r.WithContext(context.WithValue(r.Context(), requestInfoKey{}, info))
		}
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		next.ServeHTTP(ww, r)
		elapsed := time.Since(info.start)

		tool := info.tool
		if tool == "" {
			tool = labelUnknownTool
		}
		label := info.label
		if label == "" {
			label = labelOther
		}
		tenant := info.tenant
		if tenant == "" {
			tenant = AnonymousTenant
		}
		if info.label != "" && !info.counted {
			// Only tool API calls count as requests; health checks and
			// scrapes would drown the series.
			api := info.api
			if api == "" {
				api = APIREST // the MCP adapter sets its door before anything can refuse
			}
			s.metrics.observeRequest(api, tool, label, elapsed)
		}
		route := info.route
		if route == "" {
			route = routeOf(r)
		}
		// Room for the optional "api" and "token" attributes, so appending it does not
		// copy the slice.
		attrs := make([]slog.Attr, 0, 11)
		attrs = append(attrs,
			slog.String("request_id", info.id),
			slog.String("method", r.Method),
			slog.String("route", route),
			slog.String("tenant", tenant),
			slog.String("tool", tool),
			slog.String("key_prefix", info.keyPrefix),
			slog.String("outcome", label),
			slog.Int("status", ww.Status()),
			durationAttr("duration_ms", elapsed),
		)
		if info.api != "" {
			attrs = append(attrs, slog.String("api", string(info.api)))
		}
		if info.previousToken {
			attrs = append(attrs, slog.String("token", "previous"))
		}
		s.log.LogAttrs(r.Context(), levelFor(ww.Status()), "request", attrs...)
	})
}

// durationAttr logs d in milliseconds with microsecond precision.
func durationAttr(k string, d time.Duration) slog.Attr {
	return slog.Float64(k, float64(d.Microseconds())/1000)
}

// levelFor logs server-side failures as errors, everything else as info.
func levelFor(status int) slog.Level {
	if status >= 500 {
		return slog.LevelError
	}
	return slog.LevelInfo
}

// routeOf returns the matched route pattern (never the raw path, which can
// hold anything a client sends).
func routeOf(r *http.Request) string {
	if rc := chi.RouteContext(r.Context()); rc != nil {
		if p := rc.RoutePattern(); p != "" {
			return p
		}
	}
	return "unmatched"
}
