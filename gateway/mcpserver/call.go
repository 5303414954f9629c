package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// The MCP adapter of the call path: a tools/call becomes a Call (the raw
// arguments, the identity from _meta or the headers) for Server.Call, and
// its Result becomes a CallToolResult or a JSON-RPC error. Everything
// between (checks, store decision, lease, execution, recording, metrics)
// is the call path's, shared with REST.

// toolHandler is the go-sdk handler of one registry tool. (tools/call
// reaches e.call through e.dispatchCall before go-sdk's own dispatch; the
// handler is what go-sdk needs to list the tool.)
func (e *endpoint) toolHandler(entry *tools.Entry) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return e.call(ctx, entry, req)
	}
}

// emptyArguments are the arguments of a tools/call that sends none.
var emptyArguments = []byte("{}")

// call runs one tools/call of go-sdk's through the call path.
func (e *endpoint) call(ctx context.Context, entry *tools.Entry, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	// An upstream's input requests go back to the client, whose
	// continuation comes back here with the same identity.
	return e.callWith(ctx, entry, req, mcpMultiRoundTrip(req))
}

// callWith is call with the multi round-trip fields given: the fast path
// (fast.go) knows the client's protocol from its header, not from a
// go-sdk session.
func (e *endpoint) callWith(ctx context.Context, entry *tools.Entry, req *mcp.CallToolRequest, mrt callpath.MultiRoundTrip) (*mcp.CallToolResult, error) {
	var header http.Header
	if req.Extra != nil {
		header = req.Extra.Header
	}
	meta := rawMeta(ctx, req.Params.Meta)
	c := e.newCall(ctx, entry, req.Params.Arguments, meta, header)
	c.MultiRoundTrip = mrt
	if id, ok := approvalContinuation(mrt); ok {
		return e.callerDecides(ctx, c, id) // elicitation.go
	}
	res := e.gw.Call(ctx, c)
	if res.Problem != nil && res.Problem.Caller != nil && callerCanBeAsked(mrt, meta) {
		return approvalInputRequired(res.Problem.Caller), nil // elicitation.go
	}
	return e.render(c, res) // identityless.go
}

// newCall builds the Call of one tools/call from its raw parts: the
// arguments as sent, params._meta with each member's raw JSON, and the
// POST's headers. It needs nothing of go-sdk, so any MCP front can use it.
func (e *endpoint) newCall(ctx context.Context, entry *tools.Entry, arguments json.RawMessage, meta map[string]json.RawMessage, header http.Header) *callpath.Call {
	// The raw bytes of params.arguments: the call path checks them as
	// I-JSON (duplicate names included) and derives the key from exactly
	// what the client sent.
	args := []byte(arguments)
	if len(args) == 0 {
		args = emptyArguments
	}
	c := &callpath.Call{
		API:       callpath.APIMCP,
		Tenant:    callpath.TenantFrom(ctx),
		Entry:     entry,
		Arguments: args,
		Wait:      e.opts.inProgressWait(),
		Received:  callpath.RequestStart(ctx),
	}
	// The MCP convention carries the trace context in _meta; it wins over
	// the POST's traceparent header (a client may reuse one HTTP session
	// for the calls of many traces).
	c.Traceparent, _ = callpath.MetaString(meta["traceparent"])
	c.Tracestate, _ = callpath.MetaString(meta["tracestate"])
	src := callpath.IdentitySource{API: callpath.APIMCP, Header: header, Meta: meta, HostCall: hostCallID(meta, e.opts.hostCallIDs())}
	callpath.ReadIdentity(c, src, e.gw.KeyMode())
	c.AllowUnkeyed = e.opts.AllowUnkeyed && !entry.Spec.ReadOnly
	e.keyByFingerprint(ctx, c) // identityless.go
	return c
}

// rawMeta returns params._meta with each member's raw JSON: as the guard
// read it from the request, or (outside the guard) re-encoded from
// go-sdk's decoded map.
func rawMeta(ctx context.Context, decoded map[string]any) map[string]json.RawMessage {
	if env := envelopeFrom(ctx); env != nil {
		return env.meta
	}
	if len(decoded) == 0 {
		return nil
	}
	meta := make(map[string]json.RawMessage, len(decoded))
	for name, v := range decoded {
		if raw, err := json.Marshal(v); err == nil {
			meta[name] = raw
		}
	}
	return meta
}

// mcpRender turns the call path's Result for c into the contract's MCP
// answer.
func mcpRender(c *callpath.Call, res callpath.Result) (*mcp.CallToolResult, error) {
	entry := c.Entry
	if res.InputRequired {
		// Not an outcome: passed on as the upstream sent it, without an
		// execution (nothing was recorded).
		return mcpAnswer(entry, res), nil
	}
	switch res.Kind {
	case callpath.ResultExecuted, callpath.ResultReplayed:
		out := mcpAnswer(entry, res)
		return withExecution(out, c, res.ExecutionID, res.Replayed), nil
	case callpath.ResultReadOnly:
		return mcpAnswer(entry, res), nil
	case callpath.ResultUnkeyed:
		out := mcpAnswer(entry, res)
		if out.Meta == nil {
			out.Meta = mcp.Meta{}
		}
		out.Meta[wire.MetaIdempotency] = wire.MetaIdempotencyNone
		return out, nil
	}
	p := res.Problem
	if p == nil {
		p = callpath.NewProblem(wire.CodeToolFailed, "the gateway could not run the call; retry")
	}
	switch {
	case isMCPToolFailure(p.Code):
		out := mcpProblemFailure(p)
		if res.ExecutionID != "" {
			out = withExecution(out, c, res.ExecutionID, false)
		}
		return out, nil
	case p.Code == wire.CodeInvalidArguments && isObjectText(c.Arguments):
		// Arguments that are an object but break the schema: the model
		// can correct them. Arguments that are not an object at all are
		// a malformed request (-32602).
		return mcpSchemaFailure(p), nil
	}
	return nil, rpcError(p)
}

// mcpAnswer renders a tool's answer. One that was not recorded (5xx, or
// the transient 408, 425, 429) is a failure the same call may retry: a
// tool result with isError and the tool's body as text.
func mcpAnswer(entry *tools.Entry, res callpath.Result) *mcp.CallToolResult {
	if !callpath.Recordable(res.Status) {
		return mcpFailure(wire.CodeToolFailed, true, string(res.Body))
	}
	return mcpOutcome(entry, res.Status, res.Body)
}

// isObjectText reports whether JSON text (already checked as I-JSON) is
// an object.
func isObjectText(text []byte) bool {
	trimmed := bytes.TrimLeft(text, " \t\r\n")
	return len(trimmed) > 0 && trimmed[0] == '{'
}
