package gatewaycmd

import (
	"context"
	"fmt"

	"github.com/toolgateway/toolgateway/tools/mcptool"
)

// mcpGuarantees names the line verify prints for an mcp_servers entry whose
// tools it did not verify: none of the guarantees ran on them.
const mcpGuarantees = "every guarantee"

// listMCPTools is -mcp-list: it connects to every MCP server as start-up
// does (a command server is started) and lists its tools, bounded by
// mcpStartWait, then stops listening to them. The tools listed are in
// st.opts.Tools with their names, input schemas and policies, where
// verify replaces them by stand-ins like every other tool: no tools/call
// ever reaches a server.
func listMCPTools(ctx context.Context, st *startup) error {
	if st.mcp == nil {
		return nil
	}
	err := startMCP(ctx, st.mcp, st.log)
	_ = st.mcp.Close() // no relisting, no session left open while verify runs
	if err != nil {
		return fmt.Errorf("verify: -mcp-list: %w", err)
	}
	return nil
}

// mcpServerResults is one N/A line per mcp_servers entry whose tools are
// not in verify's output: without -mcp-list (their tools are known only
// once the server lists them, and verify calls no real upstream), or
// when the server did not list them, or listed none.
func mcpServerResults(st *startup, mcpListed bool) []VerifyResult {
	notReady := map[string]bool{}
	listed := map[string]int{}
	if mcpListed && st.mcp != nil {
		for _, name := range st.mcp.NotReady() {
			notReady[name] = true
		}
		for _, e := range st.opts.Tools.Entries() {
			if t, ok := e.Tool.(*mcptool.Tool); ok {
				listed[t.Provenance()]++
			}
		}
	}
	var out []VerifyResult
	for _, e := range st.cfg.MCPServers {
		var why string
		switch {
		case !mcpListed:
			why = fmt.Sprintf("tools of MCP server %s are known only when it lists them; verify calls no real upstream, so they were not verified (-mcp-list lists them, tools/list only)", e.Name)
		case notReady[e.Name]:
			why = fmt.Sprintf("MCP server %s did not list its tools within %s, so they were not verified", e.Name, mcpStartWait)
		case countProvenance(listed, e.Name) == 0:
			why = fmt.Sprintf("MCP server %s listed no tool this config serves", e.Name)
		default:
			continue
		}
		out = append(out, VerifyResult{Tool: fmt.Sprintf("(mcp server %s)", e.Name), Guarantee: mcpGuarantees, Verdict: verifyNA, Detail: why})
	}
	return out
}
