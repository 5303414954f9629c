package gateway

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/tools"
)

// toolHandler is the go-sdk handler of one registry tool.
//
// PHASE A: tools/call is not wired to the call path yet; it answers
// -32603 until the transport-independent call path lands.
func (e *mcpEndpoint) toolHandler(entry *tools.Entry) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: -32603, Message: "tools/call is not wired yet"}
	}
}
