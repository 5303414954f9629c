package gatewaycmd

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/tools/mcptool"
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
	var results []VerifyResult
	if err := json.Unmarshal([]byte(out), &results); err != nil {
		t.Fatalf("-json output: %v\n%s", err, out)
	}
	got := verdicts(t, results)
	for _, g := range []string{"replay runs once", "racing identical calls run once", "uncertain outcome is not rerun", "altered receipt is detected"} {
		if v := got["t_create_ticket/"+g]; v != verifyPass {
			t.Errorf("t_create_ticket / %s: %q, want PASS", g, v)
		}
	}
	if v := got["t_get_ticket/replay runs once"]; v != verifyNA {
		t.Errorf("t_get_ticket (readOnlyHint) / replay runs once: %q, want N/A", v)
	}
	if _, ok := got["(mcp server tickets)/"+mcpGuarantees]; ok {
		t.Errorf("a listed server still has its not-verified line:\n%s", out)
	}
	if up.srv.Initialized() == 0 {
		t.Fatal("the MCP server was never connected to, yet its tools are in the output")
	}
	if calls := up.srv.All(); len(calls) != 0 {
		t.Fatalf("the MCP server ran %d tools/call (%+v), want none: verify calls no real upstream", len(calls), calls)
	}
}

// The stand-in MCP server of -mcp-list has the listed tools, is reached
// through the gateway's MCP upstream code (an mcptool.Tool in the
// registry), counts each tools/call at the stand-in, and, told to be
// uncertain, runs the call and drops the connection: the gateway sees an
// uncertain outcome. The real server runs nothing.
func TestVerifyMCPStandInServerCountsAndDropsUncertainCalls(t *testing.T) {
	up := newMCPUpstream(t)
	st, err := prepare(mcpVerifyConfig(t, up.http.URL), envOf(nil), io.Discard, true)
	if err != nil {
		t.Fatal(err)
	}
	defer st.mcp.Close()
	if err := listMCPTools(t.Context(), st); err != nil {
		t.Fatal(err)
	}
	registry := tools.NewRegistry()
	standIns := map[string]*standIn{}
	m, err := startMCPStandIns(t.Context(), st, registry, standIns)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	entry, ok := registry.Lookup("t_create_ticket")
	if !ok {
		t.Fatalf("t_create_ticket is not in the stand-ins' registry")
	}
	if _, ok := entry.Tool.(*mcptool.Tool); !ok {
		t.Fatalf("t_create_ticket is a %T, want the gateway's MCP upstream tool", entry.Tool)
	}
	call := func() (*tools.Response, error) {
		return entry.Tool.Call(context.Background(), &tools.Request{Arguments: []byte(`{"title":"verify"}`), ExecutionID: "01JVERIFY"})
	}
	resp, err := call()
	if err != nil || resp.Status != 200 || !strings.Contains(string(resp.Body), `{\"ok\":true,\"n\":1}`) {
		t.Fatalf("a call through the stand-in MCP server: %v %+v, want 200 with the stand-in's answer", err, resp)
	}
	standIns["t_create_ticket"].uncertain.Store(true)
	if _, err := call(); !errors.Is(err, tools.ErrOutcomeUncertain) {
		t.Fatalf("an uncertain stand-in: %v, want ErrOutcomeUncertain", err)
	}
	if n := standIns["t_create_ticket"].runs.Load(); n != 2 {
		t.Fatalf("the stand-in ran %d times, want 2 (the uncertain call ran too)", n)
	}
	if calls := up.srv.All(); len(calls) != 0 {
		t.Fatalf("the real MCP server ran %d calls, want none", len(calls))
	}
}
