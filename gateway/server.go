// Package gateway is the HTTP side of the tool-execution gateway: the
// router, the REST door (rest.go), discovery, readiness and the admin API,
// served over the engine in gateway/callpath. The MCP door
// (gateway/mcpserver) and the console attach to the same router with
// Options.Mounts; docs/architecture.md has the map.
package gateway

import (
	"net/http"
	"sync/atomic"

	"github.com/toolgateway/toolgateway/gateway/callpath"
)

// Server is the gateway's HTTP handler: the engine and its routes.
type Server struct {
	*callpath.Engine
	opts    callpath.Options
	handler http.Handler
	// opsHandler serves the operations endpoints (OperationsHandler).
	opsHandler http.Handler
	// notReady is the last /readyz verdict, so only changes are logged.
	notReady atomic.Bool
	// chains is how far the console verified each tenant's receipt chain
	// (receiptchains.go).
	chains chainChecks
	// console and consoleKeys are the console's settings (WithConsole)
	// and its session keys now (ReloadConsoleKeys).
	console     ConsoleOptions
	consoleKeys atomic.Pointer[[][]byte]
}

// A ServerOption configures what the Server serves beside the engine
// (WithConsole).
type ServerOption func(*Server) error

// NewServer builds a Server from opts, its engine's, and with, the
// Server's own.
func NewServer(opts callpath.Options, with ...ServerOption) (*Server, error) {
	s := &Server{}
	for _, o := range with { // first: a refusal leaves no engine running
		if err := o(s); err != nil {
			return nil, err
		}
	}
	e, err := callpath.New(opts)
	if err != nil {
		return nil, err
	}
	s.Engine, s.opts = e, e.Options()
	s.handler = s.routes()
	s.opsHandler = s.operationsRoutes()
	return s, nil
}

// ServeHTTP serves one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.handler.ServeHTTP(w, r)
}

// OperationsHandler serves /healthz, /readyz, /metrics and the admin API
// alone, for a listener of their own; with Options.SeparateOperations they
// are served only here.
func (s *Server) OperationsHandler() http.Handler { return s.opsHandler }
