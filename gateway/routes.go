package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/receipts"
	"github.com/toolgateway/toolgateway/wire"
)

// routes wires the tool API, the Options.Mounts (/mcp) and (unless Options.SeparateOperations)
// the operations endpoints; auth guards the tool API only.
func (s *Server) routes() http.Handler {
	r := s.newRouter()
	if !s.opts.SeparateOperations {
		s.mountOperations(r)
	}

	r.Route("/api/tools/v1", func(r chi.Router) {
		r.Use(s.authenticate)
		r.Get("/", s.handleList)
		r.Head("/", s.handleList)
		// The mount point answers every method to chi, so name its own.
		r.MethodNotAllowed(func(w http.ResponseWriter, _ *http.Request) {
			p := NewProblem(wire.CodeMethodNotAllowed, "list the tools with GET")
			p.allow = "GET, HEAD"
			WriteProblem(w, p)
		})
		// A caller deciding its approvals; "approvals" is a reserved tool
		// name (tools.ReservedName), so this path is never a tool's.
		r.HandleFunc("/approvals/{id}/{decision}", s.handleCallerDecision)
		// One handler for every method: the contract checks "tool exists"
		// (404) before "method" (405), which a method router cannot do.
		r.HandleFunc("/{tool}", s.handleTool)
	})

	s.mountProtectedResourceMetadata(r)
	r.Get(receipts.KeysPath, s.handleReceiptKeys) // receiptcheckpoints.go
	for _, mount := range s.opts.Mounts {
		mount(s, r)
	}
	return r
}

// operationsRoutes wires the operations endpoints alone, for a listener of
// their own (Options.SeparateOperations).
func (s *Server) operationsRoutes() http.Handler {
	r := s.newRouter()
	s.mountOperations(r)
	return r
}

// newRouter is a router with the middleware every endpoint has. Order:
// the request id comes first so every response (errors included) carries
// it; the access log and metrics wrap everything below.
func (s *Server) newRouter() *chi.Mux {
	r := chi.NewRouter()
	r.Use(requestID)
	r.Use(s.extractTrace)
	r.Use(closeChunked)
	r.Use(s.accessLog)
	// HEAD is served wherever GET is (health checks often use it).
	r.Use(middleware.GetHead)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		WriteProblem(w, NewProblem(wire.CodeNotFound, "no such endpoint"))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		p := NewProblem(wire.CodeMethodNotAllowed, "method not allowed on this endpoint")
		p.allow = allowedMethods(r, req.URL.Path)
		WriteProblem(w, p)
	})

	return r
}

// mountOperations wires what operators and orchestrators use: health,
// readiness, metrics and (with an admin token) the admin API and the
// operator console.
func (s *Server) mountOperations(r chi.Router) {
	r.Get("/healthz", s.handleHealthz)
	r.Get("/readyz", s.handleReadyz)
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(s.metrics.gatherer, promhttp.HandlerOpts{}))
	if s.opts.AdminTokenSHA256 != nil {
		r.Route("/admin/v1", func(r chi.Router) {
			r.Use(s.authenticateAdmin)
			r.Get("/records", s.handleAdminList)
			r.Get("/records/{tenant}/{tool}/*", s.handleAdminGet)
			r.Delete("/records/{tenant}/{tool}/*", s.handleAdminDelete)
			// The key is the rest of the path, so …/{key}/resolve shares
			// the pattern; the handler takes the suffix off.
			r.Post("/records/{tenant}/{tool}/*", s.handleAdminResolve)
			r.Get("/executions/{execution_id}", s.handleAdminExecution)
			r.Get("/approvals", s.handleAdminApprovals)
			r.Get("/approvals/{id}", s.handleAdminApproval)
			r.Post("/approvals/{id}/approve", s.handleAdminDecide(true))
			r.Post("/approvals/{id}/deny", s.handleAdminDecide(false))
			r.Get("/budgets", s.handleAdminBudgets)                     // adminbudgets.go
			r.Get("/receipts", s.handleAdminReceipts)                   // adminreceipts.go
			r.Get("/receipts/checkpoints", s.handleAdminCheckpoints)    // receiptcheckpoints.go
			r.Post("/receipts/checkpoints", s.handleAdminCheckpointNow) // receiptcheckpoints.go
		})
		s.mountConsole(r)
	}
}

// allowedMethods lists the methods router serves on path, for the Allow
// header of a 405 (chi leaves it to custom handlers).
func allowedMethods(router chi.Routes, path string) string {
	var allowed []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions} {
		if router.Match(chi.NewRouteContext(), m, path) {
			allowed = append(allowed, m)
			if m == http.MethodGet {
				allowed = append(allowed, http.MethodHead) // middleware.GetHead
			}
		}
	}
	return strings.Join(allowed, ", ")
}

// handleHealthz answers 200 while the process serves.
func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"status":"ok"}`))
}

// readyzTimeout bounds the store ping of /readyz, well inside Kubernetes'
// default probe timeout of 1 s: a store that hangs is "not ready" in time.
const readyzTimeout = 500 * time.Millisecond

// handleReadyz answers 200 when the store answers within readyzTimeout,
// in a layout this gateway knows, else 503 (naming both layout versions
// when the store's is newer). It logs when readiness changes, not on every probe (a probe
// every few seconds against a dead store would flood the log).
func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyzTimeout)
	err := s.store.Ping(ctx)
	cancel()
	wasReady := !s.notReady.Swap(err != nil)
	switch {
	case err != nil && wasReady:
		s.log.WarnContext(r.Context(), "not ready: the store does not answer", "error", err)
	case err == nil && !wasReady:
		s.log.InfoContext(r.Context(), "ready again: the store answers")
	}
	if err != nil {
		detail := "the idempotency store does not answer"
		// A store written by a newer gateway answers, but this one must not
		// decide on it: say which versions, so the operator knows to upgrade.
		var layoutErr *idempotency.LayoutError
		if errors.As(err, &layoutErr) {
			detail = layoutErr.Error()
		}
		WriteProblem(w, NewProblem(wire.CodeStoreUnavailable, detail).WithRetryAfter(1))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if v := s.settings.Load().oidc; v != nil {
		if err := v.Ready(); err != nil {
			// Ready still: the store decides and static tokens work; only
			// the provider's tokens are refused until its keys are had.
			body, _ := json.Marshal(map[string]string{"status": "ready", "oidc": err.Error()})
			_, _ = w.Write(body)
			return
		}
	}
	_, _ = w.Write([]byte(`{"status":"ready"}`))
}
