package gatewaycmd

import (
	"path/filepath"
	"testing"

	"github.com/toolgateway/toolgateway/internal/mcptest"
	"github.com/toolgateway/toolgateway/wire"
)

// TestMCPUpstreamResultOverMaxResponseBytes: an MCP upstream's result over
// the server's max_response_bytes answers 502 upstream_response_too_large
// and is not recorded (the retry runs the tool again and fails the same
// way), while calls under the cap on the same server keep working.
func TestMCPUpstreamResultOverMaxResponseBytes(t *testing.T) {
	up := newMCPUpstream(t)
	g := startGateway(t, "listen: 127.0.0.1:0\nstore:\n  path: "+filepath.Join(t.TempDir(), "gw.db")+`
mcp_servers:
  - name: tickets
    url: `+up.http.URL+`
    max_response_bytes: 10000
`)
	args := `{"bytes":20000}`
	for attempt := 1; attempt <= 2; attempt++ {
		r := keyedCall(t, g.addr, "big", 1, "big_result", args)
		if r.status != 502 || r.problemCode() != wire.CodeUpstreamResponseTooLarge {
			t.Fatalf("attempt %d: %d %s", attempt, r.status, r.body)
		}
		if n := len(up.srv.Executions(mcptest.ToolBig)); n != attempt {
			t.Fatalf("attempt %d: the server ran big_result %d times (the failure must not be recorded)", attempt, n)
		}
	}
	r := keyedCall(t, g.addr, "big", 2, "big_result", `{"bytes":5000}`)
	if r.status != 200 || r.header.Get("Idempotent-Replayed") != "false" {
		t.Fatalf("under the cap: %d %s", r.status, r.body)
	}
}
