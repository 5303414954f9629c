package mcpserver

import (
	"testing"

	"github.com/toolgateway/toolgateway/gateway/callpath"
)

// TestMCPCodeColumn: every code of the table renders over MCP as a
// JSON-RPC error code (negative) or as a tool result, and rpcCode reports
// the table's column as it is.
func TestMCPCodeColumn(t *testing.T) {
	for _, code := range callpath.Codes() {
		mcp, ok := rpcCodes[code]
		if !ok {
			t.Errorf("%s: no MCP rendering in rpcCodes", code)
			continue
		}
		if mcp != rpcToolResult && mcp >= 0 {
			t.Errorf("%s: MCP rendering %d is neither a JSON-RPC error code nor a tool result", code, mcp)
		}
		rpc, toolResult := rpcCode(code)
		if rpc != mcp || toolResult != (mcp == rpcToolResult) {
			t.Errorf("%s: rpcCode = %d, %v; the table says %d", code, rpc, toolResult, mcp)
		}
	}
}
