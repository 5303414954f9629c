package gateway

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
)

func stringAttr(k, v string) slog.Attr  { return slog.String(k, v) }
func intAttr(k string, v int) slog.Attr { return slog.Int(k, v) }

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
