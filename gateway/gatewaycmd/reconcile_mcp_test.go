package gatewaycmd

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/internal/mcptest"
)

// An MCP upstream tool reconciled through a tool of the same server
// (mcp_servers[].reconcile.tool): create_ticket outlives its timeout, its
// record turns UNKNOWN, and the server's ticket_status tool, asked with
// the contract's question as its arguments, confirms it: the retry
// replays the confirmed result, the ticket was created once.
func TestReconcileMCPToolAsksTheSameServer(t *testing.T) {
	up := newMCPUpstream(t)
	var asked atomic.Int64
	var question atomic.Value
	up.srv.MCP().AddTool(&mcp.Tool{Name: "ticket_status", Description: "What became of a create_ticket call", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			asked.Add(1)
			question.Store(string(req.Params.Arguments))
			answer := map[string]any{"outcome": "not_committed"}
			if len(mcptest.Filter(up.srv.All(), mcptest.ToolCreate, "start")) > 0 {
				answer = map[string]any{"outcome": "committed", "status": 200, "body": map[string]any{"id": 7, "title": "reconciled"}}
			}
			return &mcp.CallToolResult{StructuredContent: answer, Content: []mcp.Content{&mcp.TextContent{Text: "see structuredContent"}}}, nil
		})
	g := startGateway(t, "listen: 127.0.0.1:0\nstore:\n  path: "+filepath.Join(t.TempDir(), "gw.db")+`
mcp_servers:
  - name: tickets
    url: `+up.http.URL+`
    prefix: t_
    timeout: 300ms
    lease_expiry: unknown
    reconcile:
      tool: ticket_status
      tools: [create_ticket]
      every: 100ms
      attempts: 3
`)
	args := `{"title":"slow","delay_ms":2000}`
	if r := keyedCall(t, g.addr, "mcp-rc", 1, "t_create_ticket", args); r.status < 500 {
		t.Fatalf("first call: %d %s; want the timeout's uncertain outcome", r.status, r.body)
	}
	var last reply
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last reply %d %s; asked %d\n%s", last.status, last.body, asked.Load(), grepLines(g.logs.String(), "reconcile"))
		}
	})
	waitFor(t, func() bool {
		last = keyedCall(t, g.addr, "mcp-rc", 1, "t_create_ticket", args)
		return last.status == 200 && last.header.Get("Idempotent-Replayed") == "true"
	})
	if string(last.body) != `{"id":7,"title":"reconciled"}` {
		t.Fatalf("replayed %s; want the confirmed body", last.body)
	}
	if n := len(mcptest.Filter(up.srv.All(), mcptest.ToolCreate, "start")); n != 1 || asked.Load() != 1 {
		t.Fatalf("create_ticket started %d times, ticket_status asked %d times; want 1 and 1", n, asked.Load())
	}
	var q struct {
		Tool         string          `json:"tool"`
		UpstreamKey  string          `json:"upstream_key"`
		FencingToken int64           `json:"fencing_token"`
		ExecutionID  string          `json:"execution_id"`
		Arguments    json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal([]byte(question.Load().(string)), &q); err != nil || q.Tool != "t_create_ticket" || len(q.UpstreamKey) != 64 ||
		q.FencingToken <= 0 || q.ExecutionID == "" || string(q.Arguments) != `{"delay_ms":2000,"title":"slow"}` {
		t.Fatalf("question = %v %+v", err, q)
	}
}
