package gatewaycmd

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgateway/toolgateway/internal/mcptest"
	"github.com/toolgateway/toolgateway/keyderive"
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

// TestMCPStdioOversizedResultSparesAnotherTenantsCall: two tenants share a
// stdio upstream's one session. While globex's call runs, acme's call gets
// a result over max_response_bytes: acme gets 502
// upstream_response_too_large, globex's call completes, is recorded and
// replays, the server ran it once, and the server process was never
// restarted.
func TestMCPStdioOversizedResultSparesAnotherTenantsCall(t *testing.T) {
	bin, err := mcptestserverBinary()
	if err != nil {
		t.Fatal(err)
	}
	hash := func(token string) string {
		sum := sha256.Sum256([]byte(token))
		return hex.EncodeToString(sum[:])
	}
	logPath := filepath.Join(t.TempDir(), "execs.jsonl")
	g := startGateway(t, "listen: 127.0.0.1:0\nstore:\n  path: "+filepath.Join(t.TempDir(), "gw.db")+`
auth:
  tenants:
    - name: acme
      token_sha256: `+hash("token-acme")+`
    - name: globex
      token_sha256: `+hash("token-globex")+`
mcp_servers:
  - name: local
    command: [`+bin+`, -log, `+logPath+`]
    max_response_bytes: 65536
`)
	call := func(token, session, tool, args string) reply {
		key, err := keyderive.Key(session, 1, tool, []byte(args))
		if err != nil {
			t.Error(err)
			return reply{}
		}
		req, _ := http.NewRequest(http.MethodPost, "http://"+g.addr+"/api/tools/v1/"+tool, strings.NewReader(args))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("Agent-Session-Id", session)
		req.Header.Set("Agent-Step-Index", "1")
		return do(t, req)
	}
	execs := func(tool, event string) []mcptest.Execution {
		all, err := mcptest.ReadLog(logPath)
		if err != nil {
			return nil
		}
		return mcptest.Filter(all, tool, event)
	}
	otherArgs := `{"title":"globex's ticket","delay_ms":1000}`
	other := make(chan reply, 1)
	go func() { other <- call("token-globex", "globex-run", "create_ticket", otherArgs) }()
	waitFor(t, func() bool { return len(execs(mcptest.ToolCreate, "start")) == 1 })

	big := call("token-acme", "acme-run", "big_result", `{"bytes":300000}`)
	if big.status != 502 || big.problemCode() != wire.CodeUpstreamResponseTooLarge {
		t.Fatalf("acme's oversized result: %d %s", big.status, big.body)
	}
	r := <-other
	if r.status != 200 || r.header.Get("Idempotent-Replayed") != "false" {
		t.Fatalf("globex's call on the same session: %d %s", r.status, r.body)
	}
	again := call("token-globex", "globex-run", "create_ticket", otherArgs)
	if again.header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(again.body, r.body) {
		t.Fatalf("globex's retry: replayed=%q %s", again.header.Get("Idempotent-Replayed"), again.body)
	}
	if n := len(execs(mcptest.ToolCreate, "done")); n != 1 {
		t.Fatalf("the server ran globex's call %d times, want 1", n)
	}
	pids := map[int]bool{}
	for _, e := range execs("", "start") {
		pids[e.PID] = true
	}
	if len(pids) != 1 {
		t.Fatalf("calls ran in %d server processes: the session was restarted", len(pids))
	}
}
