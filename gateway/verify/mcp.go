package verify

import (
	"fmt"

	"github.com/toolgateway/toolgateway/tools/mcptool"
)

// MCPGuarantees names the line verify prints for an mcp_servers entry whose
// tools it did not verify: none of the guarantees ran on them.
const MCPGuarantees = "every guarantee"

// mcpServerResults is one N/A line per mcp_servers entry whose tools are
// not in verify's output: without -mcp-list (their tools are known only
// once the server lists them, and verify calls no real upstream), or
// when the server did not list them, or listed none.
func mcpServerResults(p Program) []Result {
	listed := map[string]int{}
	if p.MCPListed {
		for _, e := range p.Options.Tools.Entries() {
			if t, ok := e.Tool.(*mcptool.Tool); ok {
				listed[t.Server()]++
			}
		}
	}
	var out []Result
	for _, e := range p.MCPServers {
		var why string
		switch {
		case !p.MCPListed:
			why = fmt.Sprintf("tools of MCP server %s are known only when it lists them; verify calls no real upstream, so they were not verified (-mcp-list lists them, tools/list only)", e.Name)
		case e.NotReady:
			why = fmt.Sprintf("MCP server %s did not list its tools within %s, so they were not verified", e.Name, p.MCPListWait)
		case listed[e.Name] == 0:
			why = fmt.Sprintf("MCP server %s listed no tool this config serves", e.Name)
		default:
			continue
		}
		out = append(out, Result{Tool: fmt.Sprintf("(mcp server %s)", e.Name), Guarantee: MCPGuarantees, Verdict: NA, Detail: why})
	}
	return out
}
