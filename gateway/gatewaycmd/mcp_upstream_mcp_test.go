package gatewaycmd

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/internal/mcptest"
	"github.com/toolgateway/toolgateway/wire"
)

// mcpClient connects go-sdk's client to the gateway's /mcp at addr.
func mcpClient(t *testing.T, addr string) *mcp.ClientSession {
	t.Helper()
	transport := &mcp.StreamableClientTransport{
		Endpoint:   "http://" + addr + "/mcp",
		HTTPClient: &http.Client{Timeout: 60 * time.Second},
		MaxRetries: -1,
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "gatewaycmd-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		t.Fatalf("connect the MCP client to %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// mcpCallTool calls tool over MCP with the call's identity in _meta.
func mcpCallTool(t *testing.T, cs *mcp.ClientSession, tool, args, session string, step uint64) (*mcp.CallToolResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return cs.CallTool(ctx, &mcp.CallToolParams{
		Name:      tool,
		Arguments: json.RawMessage(args),
		Meta:      mcp.Meta{wire.MetaSessionID: session, wire.MetaStepIndex: step},
	})
}

// outcome is what a CallToolResult (or its JSON) says about the tool's
// outcome: content, structuredContent and isError (absent = false), as
// JSON values. Envelope members the MCP library adds by protocol version
// (resultType) and _meta are left out.
func outcome(t *testing.T, v any) map[string]any {
	t.Helper()
	raw, ok := v.([]byte)
	if !ok {
		var err error
		if raw, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	out := map[string]any{"isError": false}
	for _, k := range []string{"content", "structuredContent", "isError"} {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	return out
}

// TestMCPUpstreamResultOverMCP: an MCP upstream tool's outcome reaches an
// MCP client of the gateway as the upstream's CallToolResult, unchanged
// but for the gateway's two _meta members, whichever API ran it: executed
// over REST, the same step over MCP replays it with REST's execution id;
// executed over MCP, the replay equals the first answer but for replayed.
func TestMCPUpstreamResultOverMCP(t *testing.T) {
	up := newMCPUpstream(t)
	g := startGateway(t, "listen: 127.0.0.1:0\nstore:\n  path: "+filepath.Join(t.TempDir(), "gw.db")+`
mcp_servers:
  - name: tickets
    url: `+up.http.URL+`
    prefix: t_
`)
	cs := mcpClient(t, g.addr)
	args := `{"title":"both APIs"}`

	rest := keyedCall(t, g.addr, "mcp-pass", 1, "t_create_ticket", args)
	if rest.status != http.StatusOK || rest.header.Get("Idempotent-Replayed") != "false" {
		t.Fatalf("REST call: %d %s", rest.status, rest.body)
	}
	res, err := mcpCallTool(t, cs, "t_create_ticket", args, "mcp-pass", 1)
	if err != nil {
		t.Fatalf("MCP call of the step REST ran: %v", err)
	}
	if got, want := outcome(t, res), outcome(t, rest.body); !reflect.DeepEqual(got, want) {
		t.Fatalf("MCP result %v, want the upstream's CallToolResult REST recorded %v", got, want)
	}
	if res.StructuredContent == nil || res.IsError {
		t.Fatalf("structuredContent %v isError %v, want the upstream's", res.StructuredContent, res.IsError)
	}
	if res.Meta[wire.MetaExecutionID] != rest.header.Get("Tool-Execution-Id") || res.Meta[wire.MetaReplayed] != true {
		t.Fatalf("_meta %v, want executionId %s (REST's Tool-Execution-Id) and replayed true", res.Meta, rest.header.Get("Tool-Execution-Id"))
	}
	if n := len(up.srv.Executions(mcptest.ToolCreate)); n != 1 {
		t.Fatalf("the upstream ran %d times for one step, want 1", n)
	}

	// Executed over MCP, then replayed over MCP and over REST.
	first, err := mcpCallTool(t, cs, "t_create_ticket", args, "mcp-pass", 2)
	if err != nil {
		t.Fatal(err)
	}
	again, err := mcpCallTool(t, cs, "t_create_ticket", args, "mcp-pass", 2)
	if err != nil {
		t.Fatal(err)
	}
	if first.Meta[wire.MetaReplayed] != false || again.Meta[wire.MetaReplayed] != true || first.Meta[wire.MetaExecutionID] != again.Meta[wire.MetaExecutionID] {
		t.Fatalf("first _meta %v, replay _meta %v: want the same executionId, replayed false then true", first.Meta, again.Meta)
	}
	firstJSON, _ := json.Marshal(first)
	againJSON, _ := json.Marshal(again)
	var a, b map[string]any
	_ = json.Unmarshal(firstJSON, &a)
	_ = json.Unmarshal(againJSON, &b)
	a["_meta"].(map[string]any)[wire.MetaReplayed] = true
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("replay %s differs from the first answer %s beyond replayed", againJSON, firstJSON)
	}
	restReplay := keyedCall(t, g.addr, "mcp-pass", 2, "t_create_ticket", args)
	if restReplay.header.Get("Idempotent-Replayed") != "true" || restReplay.header.Get("Tool-Execution-Id") != first.Meta[wire.MetaExecutionID] {
		t.Fatalf("REST after MCP: %d %v", restReplay.status, restReplay.header)
	}
	if got, want := outcome(t, restReplay.body), outcome(t, first); !reflect.DeepEqual(got, want) {
		t.Fatalf("REST's record %v differs from the MCP answer %v", got, want)
	}
	if n := len(up.srv.Executions(mcptest.ToolCreate)); n != 2 {
		t.Fatalf("the upstream ran %d times for two steps, want 2", n)
	}

	// An isError result of the upstream (recorded) passes through as well.
	failed, err := mcpCallTool(t, cs, "t_fail_tool", `{}`, "mcp-pass", 3)
	if err != nil {
		t.Fatal(err)
	}
	failedREST := keyedCall(t, g.addr, "mcp-pass", 3, "t_fail_tool", `{}`)
	if !failed.IsError || failedREST.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("isError over MCP: %+v; REST replay %q", failed, failedREST.header.Get("Idempotent-Replayed"))
	}
	if got, want := outcome(t, failed), outcome(t, failedREST.body); !reflect.DeepEqual(got, want) {
		t.Fatalf("isError result over MCP %v, want the upstream's %v", got, want)
	}
	if _, has := failed.Meta[wire.MetaError]; has {
		t.Fatalf("a recorded isError of the upstream is not a gateway failure: _meta %v", failed.Meta)
	}
}

// TestMCPUpstreamToolsInEveryDiscovery: an MCP upstream's tools, with the
// prefix, the upstream's description and input schema, are in the openai
// and anthropic lists and in the gateway's own MCP tools/list, read-only
// ones with readOnlyHint.
func TestMCPUpstreamToolsInEveryDiscovery(t *testing.T) {
	up := newMCPUpstream(t)
	g := startGateway(t, "listen: 127.0.0.1:0\nstore:\n  path: "+filepath.Join(t.TempDir(), "gw.db")+`
mcp_servers:
  - name: tickets
    url: `+up.http.URL+`
    prefix: t_
    tools: [create_ticket, get_ticket, fail_tool]
    read_only: [fail_tool]
`)
	createSchema := map[string]any{}
	if err := json.Unmarshal([]byte(`{"type":"object","properties":{"title":{"type":"string","minLength":1},"delay_ms":{"type":"integer","minimum":0}},"required":["title"],"additionalProperties":false}`), &createSchema); err != nil {
		t.Fatal(err)
	}
	type described struct {
		Description string
		Schema      map[string]any
	}
	check := func(format string, got map[string]described) {
		t.Helper()
		for _, name := range []string{"t_create_ticket", "t_get_ticket", "t_fail_tool"} {
			if _, ok := got[name]; !ok {
				t.Errorf("%s: %s missing; tools %v", format, name, got)
			}
		}
		if c := got["t_create_ticket"]; c.Description != "Create a ticket" || !reflect.DeepEqual(c.Schema, createSchema) {
			t.Errorf("%s: t_create_ticket = %+v, want the upstream's description and schema", format, c)
		}
		if got["t_get_ticket"].Description != "Read a ticket" {
			t.Errorf("%s: t_get_ticket = %+v", format, got["t_get_ticket"])
		}
		if _, ok := got["t_fail_rpc"]; ok {
			t.Errorf("%s: the allow-list is ignored", format)
		}
	}

	var openai []struct {
		Type     string `json:"type"`
		Function struct {
			Name        string         `json:"name"`
			Description string         `json:"description"`
			Parameters  map[string]any `json:"parameters"`
		} `json:"function"`
	}
	r := get(t, "http://"+g.addr+"/api/tools/v1?format=openai")
	if err := json.Unmarshal(r.body, &openai); err != nil || r.status != 200 {
		t.Fatalf("openai list: %d %s %v", r.status, r.body, err)
	}
	byName := map[string]described{}
	for _, tool := range openai {
		if tool.Type != "function" {
			t.Errorf("openai: %s has type %q", tool.Function.Name, tool.Type)
		}
		byName[tool.Function.Name] = described{tool.Function.Description, tool.Function.Parameters}
	}
	check("openai", byName)

	var anthropic []struct {
		Name        string         `json:"name"`
		Description string         `json:"description"`
		InputSchema map[string]any `json:"input_schema"`
	}
	r = get(t, "http://"+g.addr+"/api/tools/v1?format=anthropic")
	if err := json.Unmarshal(r.body, &anthropic); err != nil || r.status != 200 {
		t.Fatalf("anthropic list: %d %s %v", r.status, r.body, err)
	}
	byName = map[string]described{}
	for _, tool := range anthropic {
		byName[tool.Name] = described{tool.Description, tool.InputSchema}
	}
	check("anthropic", byName)

	cs := mcpClient(t, g.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	byName = map[string]described{}
	readOnly := map[string]bool{}
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		schema := map[string]any{}
		raw, _ := json.Marshal(tool.InputSchema)
		_ = json.Unmarshal(raw, &schema)
		byName[tool.Name] = described{tool.Description, schema}
		if strings.HasPrefix(tool.Name, "t_") {
			readOnly[tool.Name] = tool.Annotations != nil && tool.Annotations.ReadOnlyHint
		}
	}
	check("MCP tools/list", byName)
	if want := map[string]bool{"t_create_ticket": false, "t_get_ticket": true, "t_fail_tool": true}; !reflect.DeepEqual(readOnly, want) {
		t.Errorf("MCP tools/list readOnlyHint %v, want %v (readOnlyHint upstream, read_only in the config)", readOnly, want)
	}
}
