package callpath

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/toolgateway/toolgateway/tools"
)

// The narrow API a transport adapter outside this package (the MCP
// endpoint, gateway/mcpserver) builds on: it mounts its routes with
// [Mount], turns its requests into a [Call] for [Engine.Call] (the
// identity read with [ReadIdentity]) and renders the [Result] or
// [Problem] its own way. Everything between (checks, store decision,
// lease, execution, recording, metrics) stays the call path's.

// Mount adds routes to the router of a gateway's HTTP server (see
// [Options.Mounts]): a door (REST, MCP) or an operator surface. It runs
// once, while the server builds its router, with the Engine (whose call
// path the routes use) and the router, which already has the middleware
// every endpoint has: request id, trace
// context, access log and request metrics. A route that needs the tool
// API's auth adds [Engine.Authenticate]. the middleware every endpoint has: request id, trace
// context, access log and request metrics. A route that needs the tool
// API's auth adds [Engine.Authenticate].
type Mount func(e *Engine, r chi.Router)

// Authenticate is the tool API's auth middleware: it checks the bearer
// token (401 and nothing runs), applies the tenant's rate and in-flight
// limits, and records the tenant for [TenantFrom].
func (s *Engine) Authenticate(next http.Handler) http.Handler {
	return s.authenticate(next)
}

// Tools returns the registry the server calls tools from.
func (s *Engine) Tools() *tools.Registry { return s.tools }

// Logger returns the server's logger.
func (s *Engine) Logger() *slog.Logger { return s.log }

// MaxBodyBytes returns the effective limit of a call's arguments
// (Options.MaxBodyBytes, defaulted).
func (s *Engine) MaxBodyBytes() int64 { return s.opts.MaxBodyBytes }

// KeyMode returns the effective key mode (Options.KeyMode, defaulted).
func (s *Engine) KeyMode() KeyMode { return s.opts.KeyMode }

// TenantFrom returns the tenant [Engine.Authenticate] let in (the
// anonymous tenant when auth is not configured).
func TenantFrom(ctx context.Context) string { return tenantFrom(ctx) }

// RequestStart returns when the request arrived, for [Call.Received]
// (zero outside a request of a router from [Engine.NewRouter]).
func RequestStart(ctx context.Context) time.Time { return requestStart(ctx) }

// MarkRoute names the route and the door of the request in its access-log
// line and metrics (chi would report a sub-router's pattern).
func MarkRoute(ctx context.Context, route string, api API) {
	if info := infoFrom(ctx); info != nil {
		info.route = route
	}
	setAPI(ctx, api)
}

// MarkInvalid records that the request was refused before it reached the
// call path as not a request the endpoint reads (outcome "invalid").
func MarkInvalid(ctx context.Context) { setLabel(ctx, "", labelInvalid) }

// MarkRefused records that the request was refused with a problem code
// before it reached the call path (the code's outcome label).
func MarkRefused(ctx context.Context, code string) { setLabel(ctx, "", codeOf(code).label) }

// Recordable reports whether a tool's status is an outcome the call path
// records for replay (2xx–4xx, but the transient 408, 425 and 429); any
// other is a failure the same call may retry.
func Recordable(status int) bool { return recordable(status) }

// WithAllow sets the Allow header of a 405 problem.
func (p *Problem) WithAllow(methods string) *Problem {
	p.allow = methods
	return p
}

// IsJSONRequest reports whether the request's one Content-Type is
// application/json (with any parameters).
func IsJSONRequest(h http.Header) bool {
	return isJSONContentType(requestContentType(h))
}

// InnermostWriter unwraps middleware writers (those with Unwrap) down to
// net/http's own: only it learns from an http.MaxBytesReader that the
// limit was hit, and then closes the connection instead of reading on.
func InnermostWriter(w http.ResponseWriter) http.ResponseWriter {
	return innermostWriter(w)
}

// Options returns the options the engine runs with, defaults filled in.
func (s *Engine) Options() Options { return s.opts }

// SetRoute names the request's route in its access-log line (chi would
// report a sub-router's pattern, or rebuild it on every call).
func SetRoute(ctx context.Context, route string) {
	if info := infoFrom(ctx); info != nil {
		info.route = route
	}
}

// MarkTool names the tool a request is about in its access-log line and
// metrics, before any outcome.
func MarkTool(ctx context.Context, tool string) { setLabel(ctx, tool, "") }

// MarkProblem records that a door refused a request about tool (""
// before the tool is known) with p, under p's outcome label.
func MarkProblem(ctx context.Context, tool string, p *Problem) { setLabel(ctx, tool, p.label()) }

// PreferWait returns the N of a "Prefer: wait=N" header (RFC 7240),
// capped at maxWait; 0 when absent or malformed.
func PreferWait(h http.Header, maxWait int) int { return preferWait(h, maxWait) }

// PreferApproval reports whether the Prefer header opts the call's wait
// into waiting for a pending approval (wire.PreferApproval).
func PreferApproval(h http.Header) bool { return preferApproval(h) }

// ValidAdminKey unquotes an Idempotency-Key as the admin API takes it (an
// RFC 8941 sf-string or bare) and reports whether it is well-formed in
// any key mode.
func ValidAdminKey(raw string) (key string, ok bool) {
	key, _ = unquoteKey(raw)
	return key, validKey(key, KeyModeOpaque)
}
