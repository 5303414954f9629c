package gateway

import (
	"bytes"
	"context"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// The MCP adapter of the call path: a tools/call becomes a Call (the raw
// arguments, the identity from _meta or the headers) for Server.Call, and
// its Result becomes a CallToolResult or a JSON-RPC error. Everything
// between (checks, store decision, lease, execution, recording, metrics)
// is the call path's, shared with REST.

// toolHandler is the go-sdk handler of one registry tool.
func (e *mcpEndpoint) toolHandler(entry *tools.Entry) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return e.call(ctx, entry, req)
	}
}

// emptyArguments are the arguments of a tools/call that sends none.
var emptyArguments = []byte("{}")

// call runs one tools/call through the call path.
func (e *mcpEndpoint) call(ctx context.Context, entry *tools.Entry, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	s := e.s
	// go-sdk hands over the raw bytes of params.arguments, so the call
	// path checks them as I-JSON (duplicate names included) and derives
	// the key from exactly what the client sent.
	args := []byte(req.Params.Arguments)
	if len(args) == 0 {
		args = emptyArguments
	}
	var header http.Header
	if req.Extra != nil {
		header = req.Extra.Header
	}
	c := &Call{
		API:       APIMCP,
		Tenant:    tenantFrom(ctx),
		Entry:     entry,
		Arguments: args,
		Wait:      s.opts.MCP.mcpInProgressWait(),
		Received:  requestStart(ctx),
		// An upstream's input requests go back to the client, whose
		// continuation comes back here with the same identity.
		MultiRoundTrip: mcpMultiRoundTrip(req),
	}
	// The MCP convention carries the trace context in _meta; it wins over
	// the POST's traceparent header (a client may reuse one HTTP session
	// for the calls of many traces).
	c.Traceparent, _ = req.Params.Meta["traceparent"].(string)
	c.Tracestate, _ = req.Params.Meta["tracestate"].(string)
	id, noIdentity, p := mcpIdentity(req.Params.Meta, header, s.opts.KeyMode)
	switch {
	case entry.Spec.ReadOnly:
		// No identity needed; one that is sent and well-formed is handed
		// to the tool, as REST does with the Agent-* headers.
		if p == nil && id.hasStep {
			c.Identity = Identity{SessionID: id.sessionID, StepIndex: id.stepIndex, HasStep: true}
		}
		if p == nil {
			c.Identity.Key = id.key // only to find a retired tool's record (retired.go)
		}
	default:
		c.Identity = Identity{Key: id.key, SessionID: id.sessionID, StepIndex: id.stepIndex, HasStep: id.hasStep}
		c.IdentityProblem = p
		c.NoIdentity = noIdentity
		c.AllowUnkeyed = s.opts.MCP.AllowUnkeyed
	}
	return mcpRender(entry, args, s.Call(ctx, c))
}

// mcpRender turns the call path's Result into the contract's MCP answer.
func mcpRender(entry *tools.Entry, args []byte, res Result) (*mcp.CallToolResult, error) {
	if res.InputRequired {
		// Not an outcome: passed on as the upstream sent it, without an
		// execution (nothing was recorded).
		return mcpAnswer(entry, res), nil
	}
	switch res.Kind {
	case ResultExecuted, ResultReplayed:
		out := mcpAnswer(entry, res)
		return withExecution(out, res.ExecutionID, res.Replayed), nil
	case ResultReadOnly:
		return mcpAnswer(entry, res), nil
	case ResultUnkeyed:
		out := mcpAnswer(entry, res)
		if out.Meta == nil {
			out.Meta = mcp.Meta{}
		}
		out.Meta[wire.MetaIdempotency] = wire.MetaIdempotencyNone
		return out, nil
	}
	p := res.Problem
	if p == nil {
		p = newProblem(wire.CodeToolFailed, "the gateway could not run the call; retry")
	}
	switch {
	case isMCPToolFailure(p.Code):
		out := mcpProblemFailure(p)
		if res.ExecutionID != "" {
			out = withExecution(out, res.ExecutionID, false)
		}
		return out, nil
	case p.Code == wire.CodeInvalidArguments && isObjectText(args):
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
func mcpAnswer(entry *tools.Entry, res Result) *mcp.CallToolResult {
	if !recordable(res.Status) {
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
