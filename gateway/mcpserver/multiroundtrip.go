package mcpserver

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/tools"
)

// mcpMultiRoundTrip reads a tools/call's multi round-trip fields. A client
// of protocol 2026-07-28 or later sends no initialize (go-sdk then has no
// InitializeParams for the stateless session); an older one's version is
// in them.
func mcpMultiRoundTrip(req *mcp.CallToolRequest) callpath.MultiRoundTrip {
	var m callpath.MultiRoundTrip
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
