package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/gateway/buildinfo"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// MCPOptions configure the MCP endpoint, POST /mcp: Streamable HTTP,
// stateless, serving the registry's tools with the same exactly-once
// guarantee as the REST API.
type MCPOptions struct {
	// Disabled turns POST /mcp off; it is served by default.
	Disabled bool
	// InProgressWait is how long a tools/call that meets a running call of
	// the same key waits for its outcome before answering -32001
	// request_in_progress: 0 means DefaultMCPInProgressWait, a negative
	// value means not at all; at most MaxMCPInProgressWait.
	InProgressWait time.Duration
	// AllowUnkeyed runs a mutating tool called without session and step
	// anyway, on every call and unprotected, instead of refusing the call.
	AllowUnkeyed bool
	// HostCallIDs are the _meta members whose value, a host's own id of
	// the call, keys a tools/call that carries none of the gateway's
	// identity, in order of preference (identity.go). nil means
	// DefaultMCPHostCallIDs(); an empty, non-nil list turns host call ids
	// off. Check a configured list with ValidateMCPHostCallIDs.
	HostCallIDs []string
	// fastPath, when set, turns the tools/call fast path (mcpfast.go) off
	// and on and counts what it served: the differential test's switch.
	fastPath *fastPathSwitch
}

// hostCallIDs returns the effective host call id members.
func (o MCPOptions) hostCallIDs() []string {
	if o.HostCallIDs == nil {
		return defaultHostCallIDs
	}
	return o.HostCallIDs
}

// Limits of the MCP endpoint.
const (
	DefaultMCPInProgressWait = 10 * time.Second
	MaxMCPInProgressWait     = 60 * time.Second
)

// mcpPath is the MCP endpoint.
const mcpPath = "/mcp"

// mcpEnvelopeBytes is what a tools/call may add to its arguments (the
// JSON-RPC envelope, the tool name, _meta): the request body limit of
// /mcp is max_body_bytes plus this.
const mcpEnvelopeBytes = 64 << 10

// mcpInProgressWait returns the effective in-progress wait.
func (o MCPOptions) mcpInProgressWait() time.Duration {
	switch {
	case o.InProgressWait < 0:
		return 0
	case o.InProgressWait == 0:
		return DefaultMCPInProgressWait
	}
	return min(o.InProgressWait, MaxMCPInProgressWait)
}

// mcpEndpoint serves POST /mcp. It builds the go-sdk server from the
// registry and rebuilds it when the registry changes (an MCP upstream that
// re-lists its tools), so tools/list always shows the tools a call reaches.
type mcpEndpoint struct {
	s *Server

	mu      sync.Mutex
	entries []*tools.Entry
	server  *mcp.Server
}

// mountMCP adds POST /mcp to r unless it is disabled. Auth runs first (401,
// nothing runs), then the method (405 for anything but POST: the endpoint
// is stateless, so there is no GET stream and no session to DELETE), then
// the guard that refuses what is not one JSON-RPC message, then go-sdk.
func (s *Server) mountMCP(r chi.Router) {
	if s.opts.MCP.Disabled {
		return
	}
	e := &mcpEndpoint{s: s}
	sdk := mcp.NewStreamableHTTPHandler(e.serverFor, &mcp.StreamableHTTPOptions{
		Stateless: true,
		// One JSON response per POST: a tools/call has exactly one answer,
		// and the gateway sends no notifications while a tool runs.
		JSONResponse:        true,
		Logger:              s.log,
		MaxRequestBodyBytes: s.opts.MaxBodyBytes + mcpEnvelopeBytes,
	})
	r.Route(mcpPath, func(r chi.Router) {
		r.Use(s.authenticate)
		r.Use(markMCP)
		r.MethodNotAllowed(func(w http.ResponseWriter, _ *http.Request) {
			p := newProblem(wire.CodeMethodNotAllowed, "the MCP endpoint is stateless: send every JSON-RPC message with POST")
			p.allow = http.MethodPost
			writeProblem(w, p)
		})
		r.Post("/", e.guard(sdk).ServeHTTP)
	})
}

// markMCP names the route and the api of every /mcp request in the access
// log (chi would report the sub-router's "/mcp/").
func markMCP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if info := infoFrom(r.Context()); info != nil {
			info.route = mcpPath
		}
		setAPI(r.Context(), APIMCP)
		next.ServeHTTP(w, r)
	})
}

// serverFor returns the go-sdk server of the current registry (go-sdk's
// getServer). Servers are stateless here, so one serves every request
// until the registry changes.
func (e *mcpEndpoint) serverFor(*http.Request) *mcp.Server {
	entries := e.s.tools.Entries()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.server != nil && slices.Equal(entries, e.entries) {
		return e.server
	}
	srv := mcp.NewServer(mcpImplementation(), &mcp.ServerOptions{
		Logger: sdkLogger(e.s.log),
		// Tools only; no logging capability (go-sdk's default) and no
		// list_changed notifications: a stateless server has no stream
		// to send them on.
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
	})
	listed := make(map[string]bool, len(entries))
	for _, entry := range entries {
		srv.AddTool(mcpTool(entry), e.toolHandler(entry))
		listed[entry.Spec.Name] = true
	}
	srv.AddReceivingMiddleware(e.dispatchCall(listed))
	e.entries, e.server = entries, srv
	return srv
}

// mcpTool describes a registry tool in tools/list.
func mcpTool(entry *tools.Entry) *mcp.Tool {
	return &mcp.Tool{
		Name:        entry.Spec.Name,
		Description: entry.Spec.Description,
		InputSchema: mcpInputSchema(entry.Spec.InputSchema),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: entry.Spec.ReadOnly},
	}
}

// mcpInputSchema returns the tool's schema as MCP wants it: an object
// schema with "type": "object". A schema that says so is sent unchanged;
// any other (no type, a boolean schema) is wrapped in
// {"type":"object","allOf":[schema]}, which accepts exactly the same
// arguments, since the arguments of a call are always an object.
func mcpInputSchema(raw json.RawMessage) json.RawMessage {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err == nil && string(top["type"]) == `"object"` {
		return raw
	}
	if len(raw) == 0 || string(raw) == "true" {
		return json.RawMessage(tools.DefaultInputSchema)
	}
	return json.RawMessage(`{"type":"object","allOf":[` + string(raw) + `]}`)
}

// dispatchCall answers the tools/call go-sdk's server cannot: a tool the
// registry does not have is tool_not_found with the contract's data
// (go-sdk's "unknown tool" has none), and a tool the registry resolves
// but the server does not list (a stand-in for a tool of an MCP server
// not listed yet) goes to the call path, which answers
// upstream_unavailable, retryable, as REST does. listed are the names the
// server lists; their calls go through go-sdk to toolHandler.
func (e *mcpEndpoint) dispatchCall(listed map[string]bool) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			call, ok := req.(*mcp.CallToolRequest)
			if !ok || method != "tools/call" || listed[call.Params.Name] {
				return next(ctx, method, req)
			}
			entry, found := e.s.tools.Lookup(call.Params.Name)
			if !found {
				entry, found = e.s.tools.Retired(call.Params.Name)
			}
			if !found {
				setLabel(ctx, "", labelNotFound)
				return nil, rpcError(newProblem(wire.CodeToolNotFound, "no tool of that name; tools/list lists them"))
			}
			// A stand-in, or a retired tool that still replays
			// (retired.go): answered outside go-sdk's tool handlers, so
			// the resultType they would set is set here.
			res, err := e.call(ctx, entry, call)
			if err != nil {
				return nil, err
			}
			return withResultType(call, res), nil
		}
	}
}

// mcpImplementation is the gateway's MCP serverInfo (go-sdk's server and the
// fast path send the same).
func mcpImplementation() *mcp.Implementation {
	return &mcp.Implementation{Name: "toolgateway", Version: buildinfo.Version()}
}
