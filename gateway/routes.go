package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/receipts"
	"github.com/toolgateway/toolgateway/wire"
)

// Every surface attaches to a router the same way, as a Mount over the
// engine: the REST door (mountREST), the MCP door and whatever else
// Options.Mounts brings, and on the operations side health, readiness and
// metrics, the admin API and the console. The Server's own surfaces are
// methods of the Server, which embeds the engine (asMount).

// routes wires the tool API, the Options.Mounts (/mcp) and (unless
// Options.SeparateOperations) the operations endpoints; auth guards the
// tool API only.
func (s *Server) routes() http.Handler {
	var mounts []callpath.Mount
	if !s.opts.SeparateOperations {
		mounts = s.operationsMounts()
	}
	mounts = append(mounts, asMount(s.mountREST), asMount(s.MountProtectedResourceMetadata), asMount(s.mountReceiptKeys))
	return s.router(append(mounts, s.opts.Mounts...))
}

// operationsRoutes wires the operations endpoints alone, for a listener of
// their own (Options.SeparateOperations).
func (s *Server) operationsRoutes() http.Handler {
	return s.router(s.operationsMounts())
}

// router is a router with the middleware every endpoint has and mounts
// attached, in order.
func (s *Server) router(mounts []callpath.Mount) http.Handler {
	r := s.NewRouter()
	for _, mount := range mounts {
		mount(s.Engine, r)
	}
	return r
}

// operationsMounts are what operators and orchestrators use: health,
// readiness, metrics and (with an admin token) the admin API and the
// operator console.
func (s *Server) operationsMounts() []callpath.Mount {
	mounts := []callpath.Mount{asMount(s.mountHealth)}
	if s.opts.AdminTokenSHA256 != nil {
		mounts = append(mounts, asMount(s.mountAdminAPI), asMount(s.mountConsole))
	}
	return mounts
}

// asMount is a surface of the Server as a Mount: the Server already holds
// the engine the Mount is handed.
func asMount(mount func(r chi.Router)) callpath.Mount {
	return func(_ *callpath.Engine, r chi.Router) { mount(r) }
}

// mountREST wires the REST door: the tool API under /api/tools/v1, behind
// the tool API's auth.
func (s *Server) mountREST(r chi.Router) {
	r.Route("/api/tools/v1", func(r chi.Router) {
		r.Use(s.Authenticate)
		r.Get("/", s.handleList)
		r.Head("/", s.handleList)
		// The mount point answers every method to chi, so name its own.
		r.MethodNotAllowed(func(w http.ResponseWriter, _ *http.Request) {
			p := callpath.NewProblem(wire.CodeMethodNotAllowed, "list the tools with GET")
			p.WithAllow("GET, HEAD")
			callpath.WriteProblem(w, p)
		})
		// A caller deciding its approvals; "approvals" is a reserved tool
		// name (tools.ReservedName), so this path is never a tool's.
		r.HandleFunc("/approvals/{id}/{decision}", s.handleCallerDecision)
		// One handler for every method: the contract checks "tool exists"
		// (404) before "method" (405), which a method router cannot do.
		r.HandleFunc("/{tool}", s.handleTool)
	})
}

// mountHealth wires health, readiness and metrics.
func (s *Server) mountHealth(r chi.Router) {
	r.Get("/healthz", s.handleHealthz)
	r.Get("/readyz", s.handleReadyz)
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(s.Gatherer(), promhttp.HandlerOpts{}))
}

// mountAdminAPI wires the admin API behind the admin token.
func (s *Server) mountAdminAPI(r chi.Router) {
	r.Route("/admin/v1", func(r chi.Router) {
		r.Use(s.AuthenticateAdmin)
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
		r.Get("/tools", s.handleAdminTools)                         // adminpins.go
		r.Get("/tools/{tool}", s.handleAdminTool)
		r.Post("/tools/{tool}/accept", s.handleAdminAcceptTool)
	})
}

// mountReceiptKeys serves the receipt checkpoints' public keys, a JWKS
// (receiptcheckpoints.go).
func (s *Server) mountReceiptKeys(r chi.Router) {
	r.Get(receipts.KeysPath, s.handleReceiptKeys)
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
	err := s.Store().Ping(ctx)
	cancel()
	wasReady := !s.notReady.Swap(err != nil)
	switch {
	case err != nil && wasReady:
		s.Logger().WarnContext(r.Context(), "not ready: the store does not answer", "error", err)
	case err == nil && !wasReady:
		s.Logger().InfoContext(r.Context(), "ready again: the store answers")
	}
	if err != nil {
		detail := "the idempotency store does not answer"
		// A store written by a newer gateway answers, but this one must not
		// decide on it: say which versions, so the operator knows to upgrade.
		var layoutErr *idempotency.LayoutError
		if errors.As(err, &layoutErr) {
			detail = layoutErr.Error()
		}
		callpath.WriteProblem(w, callpath.NewProblem(wire.CodeStoreUnavailable, detail).WithRetryAfter(1))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if err := s.OIDCReady(); err != nil {
		// Ready still: the store decides and static tokens work; only
		// the provider's tokens are refused until its keys are had.
		body, _ := json.Marshal(map[string]string{"status": "ready", "oidc": err.Error()})
		_, _ = w.Write(body)
		return
	}
	_, _ = w.Write([]byte(`{"status":"ready"}`))
}
