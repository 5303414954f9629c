// Package mcpserver is the MCP endpoint of the gateway, POST /mcp:
// Streamable HTTP, stateless, serving the registry's tools with the same
// exactly-once guarantee as the REST API. It is an adapter of the call
// path: a tools/call becomes a callpath.Call for callpath.Engine.Call, and
// its Result or Problem becomes the contract's MCP answer. The protocol
// is go-sdk's (github.com/modelcontextprotocol/go-sdk); the fast path
// (fast.go) answers a plain tools/call as go-sdk v1.8.0 would without
// its decoding, with what it copies of go-sdk kept in gosdk.go.
//
// The composition root mounts it: callpath.Options{Mounts:
// []callpath.Mount{mcpserver.Mount(opts)}}.
package mcpserver

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
	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// Options configure the MCP endpoint, POST /mcp: Streamable HTTP,
// stateless, serving the registry's tools with the same exactly-once
// guarantee as the REST API.
type Options struct {
	// Disabled turns POST /mcp off; it is served by default.
	Disabled bool
	// InProgressWait is how long a tools/call that meets a running call of
	// the same key waits for its outcome before answering -32001
	// request_in_progress: 0 means DefaultInProgressWait, a negative
	// value means not at all; at most MaxInProgressWait.
	InProgressWait time.Duration
	// AllowUnkeyed runs a mutating tool called without session and step
	// anyway, on every call and unprotected, instead of refusing the call.
	AllowUnkeyed bool
	// HostCallIDs are the _meta members whose value, a host's own id of
	// the call, keys a tools/call that carries none of the gateway's
	// identity, in order of preference. nil means
	// DefaultHostCallIDs(); an empty, non-nil list turns host call ids
	// off. Check a configured list with ValidateHostCallIDs.
	HostCallIDs []string
	// Identityless is what a mutating tools/call with no identity and no
	// host call id gets (mcp.identityless, mcp.dedupe_window): the zero
	// value refuses it (-32602).
	Identityless Identityless
	// ToolIdentityless overrides Identityless per tool name
	// (tools[].identityless, tools[].dedupe_window).
	ToolIdentityless map[string]Identityless
	// Reloadable, when set, lets a configuration reload change
	// Identityless and ToolIdentityless of the mounted endpoint (its
	// Reload); nil keeps them for the endpoint's life.
	Reloadable *Reloadable
	// ConsoleBaseURL, when set, makes the result of a call waiting for an
	// approval link the console's page of that approval
	// (approvals.notify.console_base_url).
	ConsoleBaseURL string
	// FastPathOff serves every tools/call through go-sdk's own path
	// (mcp.fast_path: false): the fast path (fast.go) answers as go-sdk
	// v1.8.0 does, and an operator who doubts that, or runs a go-sdk it
	// was not validated against, can turn it off at the cost of CPU.
	FastPathOff bool
	// fastPath, when set, turns the fast path off and on at run time and
	// counts what it served: the tests' switch and counter.
	fastPath *fastPathSwitch
}

// hostCallIDs returns the effective host call id members.
func (o Options) hostCallIDs() []string {
	if o.HostCallIDs == nil {
		return DefaultHostCallIDs()
	}
	return o.HostCallIDs
}

// Limits of the MCP endpoint.
const (
	DefaultInProgressWait = 10 * time.Second
	MaxInProgressWait     = 60 * time.Second
)

// Path is the MCP endpoint.
const Path = "/mcp"

// envelopeBytes is what a tools/call may add to its arguments (the
// JSON-RPC envelope, the tool name, _meta): the request body limit of
// /mcp is max_body_bytes plus this.
const envelopeBytes = 64 << 10

// inProgressWait returns the effective in-progress wait.
func (o Options) inProgressWait() time.Duration {
	switch {
	case o.InProgressWait < 0:
		return 0
	case o.InProgressWait == 0:
		return DefaultInProgressWait
	}
	return min(o.InProgressWait, MaxInProgressWait)
}

// endpoint serves POST /mcp. It builds the go-sdk server from the
// registry and rebuilds it when the registry changes (an MCP upstream that
// re-lists its tools), so tools/list always shows the tools a call reaches.
type endpoint struct {
	gw   *callpath.Engine
	opts Options
	// reloadable holds the options a reload may change (never nil).
	reloadable *Reloadable

	mu      sync.Mutex
	entries []*tools.Entry
	server  *mcp.Server
}

// Mount returns the callpath.Mount that adds POST /mcp, configured by o,
// to a gateway's router (nothing when o.Disabled). Auth runs first (401,
// nothing runs), then the method (405 for anything but POST: the endpoint
// is stateless, so there is no GET stream and no session to DELETE), then
// the guard that refuses what is not one JSON-RPC message, then the fast
// path or go-sdk.
func Mount(o Options) callpath.Mount {
	return func(gw *callpath.Engine, r chi.Router) {
		if o.Disabled {
			return
		}
		reloadable := o.Reloadable
		if reloadable == nil {
			reloadable = new(Reloadable)
		}
		reloadable.Reload(o)
		e := &endpoint{gw: gw, opts: o, reloadable: reloadable}
		sdk := mcp.NewStreamableHTTPHandler(e.serverFor, &mcp.StreamableHTTPOptions{
			Stateless: true,
			// One JSON response per POST: a tools/call has exactly one
			// answer, and the gateway sends no notifications while a tool
			// runs.
			JSONResponse:        true,
			Logger:              gw.Logger(),
			MaxRequestBodyBytes: gw.MaxBodyBytes() + envelopeBytes,
		})
		r.Route(Path, func(r chi.Router) {
			r.Use(gw.Authenticate)
			r.Use(markMCP)
			r.MethodNotAllowed(func(w http.ResponseWriter, _ *http.Request) {
				callpath.WriteProblem(w, callpath.NewProblem(wire.CodeMethodNotAllowed,
					"the MCP endpoint is stateless: send every JSON-RPC message with POST").WithAllow(http.MethodPost))
			})
			r.Post("/", e.guard(sdk).ServeHTTP)
		})
	}
}

// markMCP names the route and the api of every /mcp request in the access
// log (chi would report the sub-router's "/mcp/").
func markMCP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		callpath.MarkRoute(r.Context(), Path, callpath.APIMCP)
		next.ServeHTTP(w, r)
	})
}

// serverFor returns the go-sdk server of the current registry (go-sdk's
// getServer). Servers are stateless here, so one serves every request
// until the registry changes.
func (e *endpoint) serverFor(*http.Request) *mcp.Server {
	entries := e.gw.Tools().Entries()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.server != nil && slices.Equal(entries, e.entries) {
		return e.server
	}
	srv := mcp.NewServer(mcpImplementation(), &mcp.ServerOptions{
		Logger: sdkLogger(e.gw.Logger()),
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
func (e *endpoint) dispatchCall(listed map[string]bool) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			call, ok := req.(*mcp.CallToolRequest)
			if !ok || method != "tools/call" || listed[call.Params.Name] {
				return next(ctx, method, req)
			}
			entry, found := e.gw.Tools().Lookup(call.Params.Name)
			if !found {
				entry, found = e.gw.Tools().Retired(call.Params.Name)
			}
			if !found {
				callpath.MarkRefused(ctx, wire.CodeToolNotFound)
				return nil, rpcError(callpath.NewProblem(wire.CodeToolNotFound, "no tool of that name; tools/list lists them"))
			}
			// A stand-in, or a retired tool that still replays
			// (gateway's retired.go): answered outside go-sdk's tool handlers, so
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
