package mcpserver

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/tools"
)

// mcpProtocolMultiRoundTrip is the first MCP protocol version with multi
// round-trip requests.
const mcpProtocolMultiRoundTrip = "2026-07-28"

// mcpMultiRoundTrip reads a tools/call's multi round-trip fields. A client
// of protocol 2026-07-28 or later sends no initialize (go-sdk then has no
// InitializeParams for the stateless session); an older one's version is
// in them.
func mcpMultiRoundTrip(req *mcp.CallToolRequest) gateway.MultiRoundTrip {
	var m gateway.MultiRoundTrip
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
