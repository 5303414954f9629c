package gatewaycmd

import "fmt"

// mcpGuarantees names the line verify prints for each mcp_servers entry:
// none of the guarantees could be run on its tools.
const mcpGuarantees = "every guarantee"

// mcpServerResults is one N/A line per mcp_servers entry: its tools are
// known only once the server lists them, and verify starts no server and
// calls no upstream, so the user sees they were not verified.
func mcpServerResults(cfg *Config) []VerifyResult {
	var out []VerifyResult
	for _, e := range cfg.MCPServers {
		out = append(out, VerifyResult{
			Tool:      fmt.Sprintf("(mcp server %s)", e.Name),
			Guarantee: mcpGuarantees,
			Verdict:   verifyNA,
			Detail:    fmt.Sprintf("tools of MCP server %s are known only when it lists them; verify calls no real upstream, so they were not verified", e.Name),
		})
	}
	return out
}
