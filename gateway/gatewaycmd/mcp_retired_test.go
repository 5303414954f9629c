package gatewaycmd

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/toolgateway/toolgateway/internal/mcptest"
	"github.com/toolgateway/toolgateway/wire"
)

// TestRetiredMCPUpstreamToolKeepsReplaying: calls completed over REST and
// over MCP keep replaying after the upstream stops listing the tool, and
// after it lists it again as read-only, until their records expire: the
// same bytes with replayed true, over both APIs, and the tool does not run
// again. A new call answers as for a missing tool (removed: 404 / -32602
// tool_not_found) or, re-listed read-only, 409 tool_changed (a changed
// definition is held, pins.go) and, once an operator accepted it, runs
// read-only.
func TestRetiredMCPUpstreamToolKeepsReplaying(t *testing.T) {
	up := newMCPUpstream(t)
	g := startGateway(t, "listen: 127.0.0.1:0\nstore:\n  path: "+filepath.Join(t.TempDir(), "gw.db")+"\nadmin:\n  token_sha256: "+tokenHash(pinsAdminToken)+`
mcp_servers:
  - name: tickets
    url: `+up.http.URL+`
`)
	cs := mcpClient(t, g.addr)
	args := `{"title":"before the change"}`
	runs := func() int { return len(up.srv.Executions(mcptest.ToolCreate)) }

	viaREST := keyedCall(t, g.addr, "retired", 1, mcptest.ToolCreate, args)
	viaMCP, err := mcpCallTool(t, cs, mcptest.ToolCreate, args, "retired", 2)
	if viaREST.status != 200 || err != nil || viaMCP.IsError || runs() != 2 {
		t.Fatalf("before the change: REST %d %s; MCP %v %+v; %d runs", viaREST.status, viaREST.body, err, viaMCP, runs())
	}
	viaMCPJSON, _ := json.Marshal(viaMCP)

	// replays checks both records replay over both APIs, unchanged.
	replays := func(stage string) {
		t.Helper()
		r := keyedCall(t, g.addr, "retired", 1, mcptest.ToolCreate, args)
		if r.status != 200 || r.header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(r.body, viaREST.body) ||
			r.header.Get("Tool-Execution-Id") != viaREST.header.Get("Tool-Execution-Id") {
			t.Fatalf("%s: REST retry %d replayed=%q %s, want the recorded %s", stage, r.status, r.header.Get("Idempotent-Replayed"), r.body, viaREST.body)
		}
		m, err := mcpCallTool(t, cs, mcptest.ToolCreate, args, "retired", 2)
		if err != nil || m.Meta[wire.MetaReplayed] != true || m.Meta[wire.MetaExecutionID] != viaMCP.Meta[wire.MetaExecutionID] {
			t.Fatalf("%s: MCP retry: %v %+v", stage, err, m)
		}
		got, _ := json.Marshal(m)
		var a, b map[string]any
		_ = json.Unmarshal(viaMCPJSON, &a)
		_ = json.Unmarshal(got, &b)
		a["_meta"].(map[string]any)[wire.MetaReplayed] = true
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%s: MCP replay %s differs from the first answer %s beyond replayed", stage, got, viaMCPJSON)
		}
		cross, err := mcpCallTool(t, cs, mcptest.ToolCreate, args, "retired", 1)
		if err != nil || cross.Meta[wire.MetaReplayed] != true || cross.Meta[wire.MetaExecutionID] != viaREST.header.Get("Tool-Execution-Id") {
			t.Fatalf("%s: the REST record over MCP: %v %+v", stage, err, cross)
		}
		if runs() != 2 {
			t.Fatalf("%s: the tool ran %d times, want 2", stage, runs())
		}
	}
	describe := func() int { return get(t, "http://"+g.addr+"/api/tools/v1/"+mcptest.ToolCreate).status }

	// Removed.
	up.srv.RemoveTool(mcptest.ToolCreate)
	waitFor(t, func() bool { return describe() == http.StatusNotFound })
	replays("removed")
	if r := keyedCall(t, g.addr, "retired", 3, mcptest.ToolCreate, args); r.status != 404 || r.problemCode() != wire.CodeToolNotFound {
		t.Fatalf("removed, a new call over REST: %d %s", r.status, r.body)
	}
	_, err = mcpCallTool(t, cs, mcptest.ToolCreate, args, "retired", 3)
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInvalidParams || !bytes.Contains(rpcErr.Data, []byte(wire.CodeToolNotFound)) {
		t.Fatalf("removed, a new call over MCP: %v", err)
	}
	if other := keyedCall(t, g.addr, "retired", 1, mcptest.ToolCreate, `{"title":"other arguments"}`); other.status != 404 {
		t.Fatalf("removed, the step with other arguments: %d %s, want 404", other.status, other.body)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+g.addr+"/api/tools/v1/"+mcptest.ToolCreate, strings.NewReader(`{"title":`))
	req.Header.Set("Content-Type", "application/json")
	if bad := do(t, req); bad.status != 404 {
		t.Fatalf("removed, arguments that are not JSON: %d %s, want 404 (the tool is checked first)", bad.status, bad.body)
	}

	// Listed again, read-only: a changed definition (its pin was taken
	// while it was mutating), so the tool is held: the completed calls
	// still replay, a new call runs nothing until the change is accepted.
	up.srv.AddReadOnlyTool(mcptest.ToolCreate)
	waitFor(t, func() bool { return describe() == http.StatusOK })
	replays("re-listed read-only, held")
	if r := keyedCall(t, g.addr, "retired", 4, mcptest.ToolCreate, args); r.status != 409 || r.problemCode() != wire.CodeToolChanged || runs() != 2 {
		t.Fatalf("re-listed read-only and held, a new call: %d %s, %d runs", r.status, r.body, runs())
	}
	if r := adminRequest(t, http.MethodPost, "http://"+g.addr+"/admin/v1/tools/"+mcptest.ToolCreate+"/accept", ""); r.status != 200 {
		t.Fatalf("accept: %d %s", r.status, r.body)
	}
	replays("re-listed read-only")
	r := keyedCall(t, g.addr, "retired", 4, mcptest.ToolCreate, args)
	if r.status != 200 || r.header.Get("Idempotent-Replayed") != "" || !bytes.Contains(r.body, []byte("read-only")) || runs() != 3 {
		t.Fatalf("re-listed read-only, a new call: %d replayed=%q %s, %d runs", r.status, r.header.Get("Idempotent-Replayed"), r.body, runs())
	}
}
