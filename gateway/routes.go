package gateway

import (
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// routes wires every endpoint. Order of middleware: the request id comes
// first so every response (errors included) carries it; the access log and
// metrics wrap everything below; auth guards the tool API only.
func (s *Server) routes() http.Handler {
	r := chi.NewRouter()
	r.Use(requestID)
	r.Use(s.accessLog)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, newProblem(http.StatusNotFound, CodeNotFound, "no such endpoint"))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		p := newProblem(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "method not allowed on this endpoint")
		p.allow = allowHeader(w)
		writeProblem(w, p)
	})

	r.Get("/healthz", s.handleHealthz)
	r.Get("/readyz", s.handleReadyz)
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(s.metrics.gatherer, promhttp.HandlerOpts{}))

	r.Route("/api/tools/v1", func(r chi.Router) {
		r.Use(s.authenticate)
		r.Get("/", s.handleList)
		// One handler for every method: the contract checks "tool exists"
		// (404) before "method" (405), which a method router cannot do.
		r.HandleFunc("/{tool}", s.handleTool)
	})

	if s.opts.AdminTokenSHA256 != nil {
		r.Route("/admin/v1/records", func(r chi.Router) {
			r.Use(s.authenticateAdmin)
			r.Get("/{tenant}/{tool}/*", s.handleAdminGet)
			r.Delete("/{tenant}/{tool}/*", s.handleAdminDelete)
		})
	}
	return r
}

// allowHeader reads the Allow header chi prepared for a 405, if any.
func allowHeader(w http.ResponseWriter) string {
	if a := w.Header().Values("Allow"); len(a) > 0 {
		w.Header().Del("Allow")
		out := a[0]
		for _, m := range a[1:] {
			out += ", " + m
		}
		return out
	}
	return ""
}

// handleHealthz answers 200 while the process serves.
func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"status":"ok"}`))
}

// handleReadyz answers 200 when the store answers, else 503.
func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	if err := s.store.Ping(r.Context()); err != nil {
		s.log.WarnContext(r.Context(), "readiness: store ping failed", "error", err)
		writeProblem(w, newProblem(http.StatusServiceUnavailable, CodeStoreUnavailable, "the idempotency store does not answer").withRetryAfter(1))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"status":"ready"}`))
}
