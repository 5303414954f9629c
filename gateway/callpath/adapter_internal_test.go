package callpath

import "testing"

// TestMCPCodeColumn: every code of the table renders over MCP as a
// JSON-RPC error code (negative) or as a tool result, and MCPCode reports
// the table's column as it is.
func TestMCPCodeColumn(t *testing.T) {
	for code, pc := range problemCodes {
		if pc.mcp != mcpToolResult && pc.mcp >= 0 {
			t.Errorf("%s: MCP rendering %d is neither a JSON-RPC error code nor a tool result", code, pc.mcp)
		}
		rpc, toolResult := MCPCode(code)
		if rpc != pc.mcp || toolResult != (pc.mcp == mcpToolResult) {
			t.Errorf("%s: MCPCode = %d, %v; the table says %d", code, rpc, toolResult, pc.mcp)
		}
	}
}
