package gateway

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/tools"
)

// MultiRoundTrip is what a call carries of an MCP multi round-trip request
// (SEP-2322, protocol 2026-07-28): whether the client can answer an
// upstream's input requests, and its answers on a continuation. An MCP
// upstream tool that asks for input returns a Response with InputRequired:
// not an outcome, so the call path records nothing and releases the claim
// (the continuation, a new call with the same identity, claims again), and
// the adapter hands the input_required result to the client without the
// execution's _meta.
type MultiRoundTrip struct {
	// AcceptsInputRequests: the client can answer input requests (MCP,
	// protocol 2026-07-28 or later). REST cannot.
	AcceptsInputRequests bool
	// Continuation is the client's inputResponses and requestState; nil on
	// a first round.
	Continuation *tools.Continuation
}

// labelInputRequired is the metrics outcome of a call answered with an
// upstream's request for client input: nothing ran to an outcome.
const labelInputRequired = "input_required"

// labelForResponse is the metrics outcome of a tool's answer.
func labelForResponse(resp *tools.Response) string {
	if resp.InputRequired {
		return labelInputRequired
	}
	return labelForStatus(resp.Status)
}

// handOn copies the call's multi round-trip fields into the tool's request.
func (m MultiRoundTrip) handOn(req *tools.Request) {
	req.AcceptsInputRequests = m.AcceptsInputRequests
	req.Continuation = m.Continuation
}

// mcpProtocolMultiRoundTrip is the first MCP protocol version with multi
// round-trip requests.
const mcpProtocolMultiRoundTrip = "2026-07-28"

// mcpMultiRoundTrip reads a tools/call's multi round-trip fields. A client
// of protocol 2026-07-28 or later sends no initialize (go-sdk then has no
// InitializeParams for the stateless session); an older one's version is
// in them.
func mcpMultiRoundTrip(req *mcp.CallToolRequest) MultiRoundTrip {
	var m MultiRoundTrip
	if req.Session != nil {
		ip := req.Session.InitializeParams()
		m.AcceptsInputRequests = ip == nil || ip.ProtocolVersion >= mcpProtocolMultiRoundTrip
	}
	if req.Params == nil || (len(req.Params.InputResponses) == 0 && req.Params.RequestState == "") {
		return m
	}
	c := &tools.Continuation{RequestState: req.Params.RequestState}
	if len(req.Params.InputResponses) > 0 {
		raw, err := json.Marshal(req.Params.InputResponses)
		if err == nil {
			c.InputResponses = raw
		}
	}
	m.Continuation = c
	return m
}

// withResultType gives res the resultType go-sdk's server sets on the
// results of its own tool handlers for a client of protocol 2026-07-28 or
// later ("complete", or "input_required" when it asks for input), for a
// result answered outside them (a retired tool's replay, answered by
// middleware), so both render alike. go-sdk keeps the field unexported and
// reads it from JSON only.
func withResultType(req *mcp.CallToolRequest, res *mcp.CallToolResult) *mcp.CallToolResult {
	if !mcpMultiRoundTrip(req).AcceptsInputRequests {
		return res
	}
	raw, err := json.Marshal(res)
	if err != nil {
		return res
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return res
	}
	kind := "complete"
	if len(res.InputRequests) > 0 {
		kind = "input_required"
	}
	fields["resultType"], _ = json.Marshal(kind)
	raw, err = json.Marshal(fields)
	if err != nil {
		return res
	}
	var typed mcp.CallToolResult
	if json.Unmarshal(raw, &typed) != nil {
		return res
	}
	return &typed
}
