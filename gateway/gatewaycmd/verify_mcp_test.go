package gatewaycmd

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgateway/toolgateway/gateway/verify"
)

// mcpVerifyConfig serves one HTTP tool and the tools of the MCP server at
// url under the prefix t_.
func mcpVerifyConfig(t *testing.T, url string) string {
	t.Helper()
	return writeConfig(t, "listen: 127.0.0.1:0\nstore:\n  path: "+filepath.Join(t.TempDir(), "gw.db")+`
tools:
  - name: refund
    http: {url: "http://127.0.0.1:1/refund"}
    input_schema: {type: object, required: [id], properties: {id: {type: string}}}
mcp_servers:
  - name: tickets
    url: `+url+`
    prefix: t_
    lease_expiry: unknown
`)
}

// Without -mcp-list, each MCP server gets one N/A line saying its tools
// were not verified, and the server is not contacted at all.
func TestVerifyNamesMCPServerToolsAsNotVerified(t *testing.T) {
	up := newMCPUpstream(t)
	out, err := runVerifyCmd(t, "-config", mcpVerifyConfig(t, up.http.URL))
	if err != nil {
		t.Fatalf("verify: %v\n%s", err, out)
	}
	want := "N/A   (mcp server tickets)  every guarantee                                         tools of MCP server tickets are known only when it lists them; verify calls no real upstream"
	if !strings.Contains(out, want) || strings.Contains(out, "t_create_ticket") || !strings.Contains(out, "PASS  refund") {
		t.Fatalf("want the HTTP tool verified and the MCP server's N/A line, got:\n%s", out)
	}
	if n := up.srv.Initialized(); n != 0 || len(up.srv.All()) != 0 {
		t.Fatalf("the MCP server saw %d sessions and %d calls, want none", n, len(up.srv.All()))
	}
}

// With -mcp-list, the server's tools are listed (tools/list only) and
// verified on stand-ins: the server lists them and runs nothing.
func TestVerifyMCPListVerifiesListedToolsWithoutCallingThem(t *testing.T) {
	up := newMCPUpstream(t)
	out, err := runVerifyCmd(t, "-config", mcpVerifyConfig(t, up.http.URL), "-mcp-list", "-json")
	if err != nil {
		t.Fatalf("verify -mcp-list: %v\n%s", err, out)
	}
	var results []verify.Result
	if err := json.Unmarshal([]byte(out), &results); err != nil {
		t.Fatalf("-json output: %v\n%s", err, out)
	}
	got := verdicts(t, results)
	for _, g := range []string{"replay runs once", "racing identical calls run once", "uncertain outcome is not rerun", "altered receipt is detected"} {
		if v := got["t_create_ticket/"+g]; v != verify.Pass {
			t.Errorf("t_create_ticket / %s: %q, want PASS", g, v)
		}
	}
	if v := got["t_get_ticket/replay runs once"]; v != verify.NA {
		t.Errorf("t_get_ticket (readOnlyHint) / replay runs once: %q, want N/A", v)
	}
	if _, ok := got["(mcp server tickets)/"+verify.MCPGuarantees]; ok {
		t.Errorf("a listed server still has its not-verified line:\n%s", out)
	}
	if up.srv.Initialized() == 0 {
		t.Fatal("the MCP server was never connected to, yet its tools are in the output")
	}
	if calls := up.srv.All(); len(calls) != 0 {
		t.Fatalf("the MCP server ran %d tools/call (%+v), want none: verify calls no real upstream", len(calls), calls)
	}
}
