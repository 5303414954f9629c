package gatewaycmd

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/internal/mcptest"
	"github.com/toolgateway/toolgateway/internal/redistest"
	"github.com/toolgateway/toolgateway/keyderive"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// mcpUpstream is the mcptest server over Streamable HTTP on loopback; down
// makes it answer 503 to everything (not up yet).
type mcpUpstream struct {
	srv  *mcptest.Server
	http *httptest.Server
	down atomic.Bool
}

func newMCPUpstream(t *testing.T) *mcpUpstream {
	t.Helper()
	return newMCPUpstreamWith(t, nil)
}

// newMCPUpstreamWith is newMCPUpstream with go-sdk's handler options.
func newMCPUpstreamWith(t *testing.T, opts *mcp.StreamableHTTPOptions) *mcpUpstream {
	t.Helper()
	s, err := mcptest.New(mcptest.Options{PageSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	u := &mcpUpstream{srv: s}
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.MCP() }, opts)
	u.http = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u.down.Load() {
			http.Error(w, "not up yet", http.StatusServiceUnavailable)
			return
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		u.http.CloseClientConnections()
		u.http.Close()
	})
	return u
}

// reply is one gateway response, body read.
type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) problemCode() string {
	var p struct{ Code string }
	_ = json.Unmarshal(r.body, &p)
	return p.Code
}

// keyedRequest is a REST call of tool at addr with the derived key
// headers of session, step and args.
func keyedRequest(addr, session string, step uint64, tool, args string) (*http.Request, error) {
	key, err := keyderive.Key(session, step, tool, []byte(args))
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/api/tools/v1/"+tool, strings.NewReader(args))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(wire.HeaderIdempotencyKey, key)
	req.Header.Set(wire.HeaderSessionID, session)
	req.Header.Set(wire.HeaderStepIndex, itoa(step))
	return req, nil
}

// keyedCall calls tool with derived key headers (and Prefer: wait=10).
func keyedCall(t *testing.T, addr, session string, step uint64, tool, args string) reply {
	t.Helper()
	req, err := keyedRequest(addr, session, step, tool, args)
	if err != nil {
		t.Error(err)
		return reply{}
	}
	req.Header.Set("Prefer", "wait=10")
	return do(t, req)
}

func do(t *testing.T, req *http.Request) reply {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", req.Method, req.URL.Path, err)
		return reply{}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: body}
}

func get(t *testing.T, url string) reply {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	return do(t, req)
}

// TestMCPUpstreamExactlyOnceThroughTheGateway fires 20 concurrent identical
// calls at an MCP upstream's tool through the gateway (embedded store and
// Redis): the server runs it once, every caller gets the same bytes, a
// later retry replays them byte for byte, and the server saw the call's
// identity in _meta.
func TestMCPUpstreamExactlyOnceThroughTheGateway(t *testing.T) {
	for _, store := range []string{"embedded", "redis"} {
		t.Run(store, func(t *testing.T) {
			up := newMCPUpstream(t)
			storeCfg := "store:\n  path: " + filepath.Join(t.TempDir(), "gw.db") + "\n"
			if store == "redis" {
				addr := redistest.Addr(t)
				prefix := redistest.Prefix("mcpup")
				storeCfg = fmt.Sprintf("store:\n  redis_url: redis://%s/0\n  key_prefix: %q\n", addr, prefix)
				t.Cleanup(func() {
					c := redis.NewClient(&redis.Options{Addr: addr})
					redistest.CleanPrefix(context.Background(), c, prefix)
					_ = c.Close()
				})
			}
			g := startGateway(t, "listen: 127.0.0.1:0\n"+storeCfg+`
mcp_servers:
  - name: tickets
    url: `+up.http.URL+`
    prefix: t_
`)
			release := up.srv.Hold() // the first call waits until all 20 are in
			const callers = 20
			args := `{"title":"exactly once"}`
			replies := make([]reply, callers)
			var wg sync.WaitGroup
			for i := range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					replies[i] = keyedCall(t, g.addr, "sess-"+store, 3, "t_create_ticket", args)
				}()
			}
			waitFor(t, func() bool {
				return len(mcptest.Filter(up.srv.Executions(""), "", "done")) == 0 && startedCount(up.srv) == 1
			})
			time.Sleep(200 * time.Millisecond) // let the others reach the store and wait
			release()
			wg.Wait()

			if n := len(up.srv.Executions(mcptest.ToolCreate)); n != 1 {
				t.Fatalf("the MCP server ran the tool %d times for one call, want 1", n)
			}
			first := replies[0]
			executed := 0
			for i, r := range replies {
				if r.status != http.StatusOK || !bytes.Equal(r.body, first.body) || r.header.Get("Tool-Execution-Id") != first.header.Get("Tool-Execution-Id") {
					t.Fatalf("caller %d: status %d body %s, want 200 and the same bytes as caller 0 (%s)", i, r.status, r.body, first.body)
				}
				if r.header.Get("Idempotent-Replayed") == "false" {
					executed++
				}
			}
			if executed != 1 {
				t.Fatalf("%d responses say executed, want 1", executed)
			}
			if first.header.Get("Content-Type") != "application/json" || !strings.Contains(string(first.body), `"content":[{"type":"text","text":"created ticket 1: exactly once"}]`) {
				t.Fatalf("body %s (%s), want the CallToolResult JSON", first.body, first.header.Get("Content-Type"))
			}

			replay := keyedCall(t, g.addr, "sess-"+store, 3, "t_create_ticket", args)
			if replay.status != 200 || replay.header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(replay.body, first.body) ||
				replay.header.Get("Content-Type") != first.header.Get("Content-Type") {
				t.Fatalf("replay: %d %q %s, want the first answer byte for byte", replay.status, replay.header.Get("Idempotent-Replayed"), replay.body)
			}
			if n := len(up.srv.Executions(mcptest.ToolCreate)); n != 1 {
				t.Fatalf("the replay ran the tool (%d executions)", n)
			}

			key, _ := keyderive.Key("sess-"+store, 3, "t_create_ticket", []byte(args))
			meta := up.srv.Executions(mcptest.ToolCreate)[0].Meta
			want := map[string]any{
				wire.MetaIdempotencyKey: tools.ScopedKey("anonymous", "t_create_ticket", key),
				wire.MetaTenant:         "anonymous",
				wire.MetaSessionID:      "sess-" + store,
				wire.MetaStepIndex:      3.0,
				wire.MetaExecutionID:    first.header.Get("Tool-Execution-Id"),
			}
			for k, v := range want {
				if meta[k] != v {
					t.Errorf("forwarded _meta[%s] = %#v, want %#v", k, meta[k], v)
				}
			}
			// The fencing token is the store's (it only grows); a JSON integer.
			if ft, ok := meta[wire.MetaFencingToken].(float64); !ok || ft < 1 || ft != float64(int64(ft)) {
				t.Errorf("forwarded _meta[%s] = %#v, want a positive JSON integer", wire.MetaFencingToken, meta[wire.MetaFencingToken])
			}
		})
	}
}

func startedCount(s *mcptest.Server) int {
	n := 0
	for _, e := range s.All() {
		if e.Event == "start" && e.Tool == mcptest.ToolCreate {
			n++
		}
	}
	return n
}

// TestMCPUpstreamOutcomeClasses checks each outcome class of an MCP tool
// through the gateway, and discovery of the server's tools.
func TestMCPUpstreamOutcomeClasses(t *testing.T) {
	up := newMCPUpstream(t)
	g := startGateway(t, "listen: 127.0.0.1:0\nstore:\n  path: "+filepath.Join(t.TempDir(), "gw.db")+`
mcp_servers:
  - name: rec
    url: `+up.http.URL+`
    prefix: r_
    timeout: 300ms
  - name: norec
    url: `+up.http.URL+`
    prefix: n_
    tools: [fail_tool]
    record_is_error: false
`)
	runs := func(tool string) int { return len(up.srv.Executions(tool)) }

	// Discovery shows the server's tools like plugin tools.
	list := get(t, "http://"+g.addr+"/api/tools/v1")
	var catalog struct {
		Tools []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
			ReadOnly    bool            `json:"read_only"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(list.body, &catalog); err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, tool := range catalog.Tools {
		found[tool.Name] = true
		if tool.Name == "r_get_ticket" && !tool.ReadOnly {
			t.Error("readOnlyHint tool not marked read_only in discovery")
		}
		if tool.Name == "r_create_ticket" && !strings.Contains(string(tool.InputSchema), `"minLength":1`) {
			t.Errorf("r_create_ticket schema %s is not the server's", tool.InputSchema)
		}
	}
	for _, name := range []string{"r_create_ticket", "r_get_ticket", "r_fail_rpc", "r_fail_tool", "n_fail_tool"} {
		if !found[name] {
			t.Errorf("discovery lacks %s", name)
		}
	}
	if found["n_create_ticket"] {
		t.Error("allow-list ignored")
	}

	// The server's schema is checked before anything is forwarded.
	before := len(up.srv.All())
	if r := keyedCall(t, g.addr, "oc", 1, "r_create_ticket", `{"title":""}`); r.status != 400 || r.problemCode() != wire.CodeInvalidArguments {
		t.Fatalf("invalid arguments: %d %s", r.status, r.body)
	}
	if len(up.srv.All()) != before {
		t.Fatal("invalid arguments reached the server")
	}

	// isError recorded: 200 with the result, replayed without running again.
	r1 := keyedCall(t, g.addr, "oc", 2, "r_fail_tool", `{}`)
	r2 := keyedCall(t, g.addr, "oc", 2, "r_fail_tool", `{}`)
	if r1.status != 200 || !strings.Contains(string(r1.body), `"isError":true`) || r2.header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(r1.body, r2.body) || runs(mcptest.ToolIsError) != 1 {
		t.Fatalf("isError recorded: %d %s / %d %s, runs %d", r1.status, r1.body, r2.status, r2.header.Get("Idempotent-Replayed"), runs(mcptest.ToolIsError))
	}
	// record_is_error: false: 500 with the result, not recorded: the retry runs.
	r1 = keyedCall(t, g.addr, "oc", 3, "n_fail_tool", `{}`)
	r2 = keyedCall(t, g.addr, "oc", 3, "n_fail_tool", `{}`)
	if r1.status != 500 || r2.status != 500 || r2.header.Get("Idempotent-Replayed") != "false" || !strings.Contains(string(r1.body), "title too long") || runs(mcptest.ToolIsError) != 3 {
		t.Fatalf("isError not recorded: %d %s / %d, runs %d", r1.status, r1.body, r2.status, runs(mcptest.ToolIsError))
	}
	// JSON-RPC error: 502 upstream_unreachable, not recorded.
	r1 = keyedCall(t, g.addr, "oc", 4, "r_fail_rpc", `{}`)
	r2 = keyedCall(t, g.addr, "oc", 4, "r_fail_rpc", `{}`)
	if r1.status != 502 || r1.problemCode() != wire.CodeUpstreamUnreachable || r2.status != 502 || runs(mcptest.ToolFailRPC) != 2 ||
		!strings.Contains(string(r1.body), "upstream answered with an error instead of a result") {
		t.Fatalf("JSON-RPC error: %d %s / %d, runs %d", r1.status, r1.body, r2.status, runs(mcptest.ToolFailRPC))
	}
	// Timeout: 504 tool_timeout, not recorded.
	r1 = keyedCall(t, g.addr, "oc", 5, "r_create_ticket", `{"title":"slow","delay_ms":3000}`)
	if r1.status != 504 || r1.problemCode() != wire.CodeToolTimeout {
		t.Fatalf("timeout: %d %s", r1.status, r1.body)
	}
	if r := keyedCall(t, g.addr, "oc", 5, "r_create_ticket", `{"title":"slow","delay_ms":3000}`); r.status != 504 || r.header.Get("Idempotent-Replayed") == "true" {
		t.Fatalf("a timed-out call was recorded: %d %s", r.status, r.body)
	}
	// readOnlyHint: no key needed, nothing stored, runs every call.
	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, "http://"+g.addr+"/api/tools/v1/r_get_ticket", strings.NewReader(`{"id":7}`))
		req.Header.Set("Content-Type", "application/json")
		if r := do(t, req); r.status != 200 || r.header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("read-only call: %d %s", r.status, r.body)
		}
	}
	if runs(mcptest.ToolGet) != 2 {
		t.Fatalf("read-only tool ran %d times for 2 calls", runs(mcptest.ToolGet))
	}
	meta := up.srv.Executions(mcptest.ToolGet)[0].Meta
	if _, hasKey := meta[wire.MetaIdempotencyKey]; hasKey || meta[wire.MetaTenant] != "anonymous" {
		t.Fatalf("read-only _meta = %v", meta)
	}
}

// TestMCPUpstreamListChangedWithoutRestart adds a tool on the server (by
// calling its add_tool tool through the gateway): the gateway lists it and
// serves it without a restart.
func TestMCPUpstreamListChangedWithoutRestart(t *testing.T) {
	up := newMCPUpstream(t)
	g := startGateway(t, "listen: 127.0.0.1:0\nstore:\n  path: "+filepath.Join(t.TempDir(), "gw.db")+`
mcp_servers:
  - name: tickets
    url: `+up.http.URL+`
    prefix: t_
    relist_interval: 1h
`)
	if r := get(t, "http://"+g.addr+"/api/tools/v1/t_fresh_tool"); r.status != 404 {
		t.Fatalf("t_fresh_tool before it exists: %d", r.status)
	}
	if r := keyedCall(t, g.addr, "lc", 1, "t_add_tool", `{"name":"fresh_tool"}`); r.status != 200 {
		t.Fatalf("add_tool: %d %s", r.status, r.body)
	}
	waitFor(t, func() bool { return get(t, "http://"+g.addr+"/api/tools/v1/t_fresh_tool").status == 200 })
	if r := keyedCall(t, g.addr, "lc", 2, "t_fresh_tool", `{"x":1}`); r.status != 200 || !strings.Contains(string(r.body), `{\"x\":1}`) {
		t.Fatalf("new tool call: %d %s", r.status, r.body)
	}
}

// TestMCPUpstreamNotListedYet starts the gateway while the server is down:
// /readyz names it, its tools run nothing, and once it is up they are
// listed and run once.
func TestMCPUpstreamNotListedYet(t *testing.T) {
	up := newMCPUpstream(t)
	up.down.Store(true)
	g := startGateway(t, "listen: 127.0.0.1:0\nstore:\n  path: "+filepath.Join(t.TempDir(), "gw.db")+`
mcp_servers:
  - name: tickets
    url: `+up.http.URL+`
    prefix: t_
`)
	ready := get(t, "http://"+g.addr+"/readyz")
	if ready.status != 503 || ready.problemCode() != wire.CodeUpstreamUnavailable || !strings.Contains(string(ready.body), `"mcp_servers":["tickets"]`) {
		t.Fatalf("/readyz while the server is down: %d %s", ready.status, ready.body)
	}
	r := keyedCall(t, g.addr, "nl", 1, "t_create_ticket", `{"title":"early"}`)
	// 503 upstream_unavailable, retryable, before the store decision:
	// nothing ran and nothing was stored.
	if r.status != 503 || r.problemCode() != wire.CodeUpstreamUnavailable || r.header.Get("Retry-After") == "" {
		t.Fatalf("call before listing: %d %s", r.status, r.body)
	}
	t.Logf("call before listing: %d %s", r.status, r.body)
	if len(up.srv.All()) != 0 {
		t.Fatal("something ran on a server that was down")
	}

	up.down.Store(false)
	waitFor(t, func() bool { return get(t, "http://"+g.addr+"/readyz").status == 200 })
	r = keyedCall(t, g.addr, "nl", 1, "t_create_ticket", `{"title":"early"}`)
	if r.status != 200 || r.header.Get("Idempotent-Replayed") != "false" || len(up.srv.Executions(mcptest.ToolCreate)) != 1 {
		t.Fatalf("the same call once listed: %d %s (runs %d)", r.status, r.body, len(up.srv.Executions(mcptest.ToolCreate)))
	}
}

// mcptestserverBinary builds the stdio test server once per run.
var mcptestserverBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "mcptestserver")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "mcptestserver")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/toolgateway/toolgateway/internal/mcptest/mcptestserver")
	cmd.Stderr = os.Stderr
	return bin, cmd.Run()
})

// TestMCPStdioUpstreamKilledMidCall runs the stdio test server under the
// gateway and kills it while a call runs: the call is not recorded (5xx),
// the server is restarted, the retry runs once, and its replay runs nothing.
func TestMCPStdioUpstreamKilledMidCall(t *testing.T) {
	bin, err := mcptestserverBinary()
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), "execs.jsonl")
	g := startGateway(t, "listen: 127.0.0.1:0\nstore:\n  path: "+filepath.Join(t.TempDir(), "gw.db")+`
mcp_servers:
  - name: local
    command: [`+bin+`, -log, `+logPath+`]
    timeout: 20s
`)
	execs := func(event string) []mcptest.Execution {
		all, err := mcptest.ReadLog(logPath)
		if err != nil {
			return nil
		}
		return mcptest.Filter(all, mcptest.ToolCreate, event)
	}
	args := `{"title":"crash","delay_ms":1500}`
	replyc := make(chan reply, 1)
	go func() { replyc <- keyedCall(t, g.addr, "kill", 1, "create_ticket", args) }()
	waitFor(t, func() bool { return len(execs("start")) == 1 })
	if err := syscall.Kill(execs("start")[0].PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r := <-replyc
	// The request had reached the server: an uncertain outcome, which a
	// lease_expiry: rerun tool answers as a retryable 5xx, not recorded.
	var problem struct{ Retryable bool }
	_ = json.Unmarshal(r.body, &problem)
	if r.status < 500 || !problem.Retryable {
		t.Fatalf("killed mid-call: %d %s", r.status, r.body)
	}
	// The retry (same key) runs once the server is back.
	var retry reply
	waitFor(t, func() bool {
		retry = keyedCall(t, g.addr, "kill", 1, "create_ticket", args)
		return retry.status == 200
	})
	if retry.header.Get("Idempotent-Replayed") != "false" || len(execs("done")) != 1 {
		t.Fatalf("retry: %s replayed=%s, %d completed runs", retry.body, retry.header.Get("Idempotent-Replayed"), len(execs("done")))
	}
	replay := keyedCall(t, g.addr, "kill", 1, "create_ticket", args)
	if replay.header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(replay.body, retry.body) || len(execs("start")) != 2 {
		t.Fatalf("replay after the retry: %s, %d starts", replay.header.Get("Idempotent-Replayed"), len(execs("start")))
	}
	// Stdio stderr reaches the gateway's log tagged with the server name.
	tagged := false
	for _, l := range g.logs.JSONLines() {
		if l["msg"] == "mcp server stderr" && l["mcp_server"] == "local" {
			tagged = true
		}
	}
	if !tagged {
		t.Fatal("no stderr line of the stdio server in the gateway log")
	}
}

// TestBadMCPServerConfigFailsNamingTheField checks that each mistake in
// mcp_servers stops start-up with one line naming the entry and field.
func TestBadMCPServerConfigFailsNamingTheField(t *testing.T) {
	bad := newMCPUpstream(t)
	s, err := mcptest.New(mcptest.Options{ExtraTools: []string{"BadName"}})
	if err != nil {
		t.Fatal(err)
	}
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.MCP() }, nil)
	badNames := httptest.NewServer(handler)
	t.Cleanup(func() { badNames.CloseClientConnections(); badNames.Close() })
	cases := []struct{ name, config, want string }{
		{"neither url nor command", "mcp_servers:\n  - name: t\n", "mcp_servers[0] (t).url or command"},
		{"unknown field", "mcp_servers:\n  - name: t\n    urll: http://x\n", "urll"},
		{"bad name", "mcp_servers:\n  - name: T\n    url: http://127.0.0.1:1/mcp\n", "mcp_servers[0] (T).name"},
		{"unset header variable", "mcp_servers:\n  - name: t\n    url: http://127.0.0.1:1/mcp\n    headers:\n      Authorization: Bearer ${NOPE}\n", "mcp_servers[0] (t).headers.Authorization: ${NOPE} is not set"},
		{"bad lease expiry", "mcp_servers:\n  - name: t\n    url: http://127.0.0.1:1/mcp\n    lease_expiry: never\n", "mcp_servers[0] (t).lease_expiry"},
		{"negative max_response_bytes", "mcp_servers:\n  - name: t\n    url: http://127.0.0.1:1/mcp\n    max_response_bytes: -1\n", "mcp_servers[0] (t).max_response_bytes"},
		{"allow-listed name clashes with a plugin", "mcp_servers:\n  - name: t\n    url: http://127.0.0.1:1/mcp\n    prefix: cmdtest-\n    tools: [slow]\n",
			`mcp_servers[0] (t).tools: tool "cmdtest-slow": MCP server "t" (not listed yet), tool "cmdtest-slow" clashes with tool "cmdtest-slow"`},
		{"listed name breaks the rule", "mcp_servers:\n  - name: t\n    url: " + badNames.URL + "\n",
			`mcp_servers (t): MCP server "t", tool "BadName": tool "BadName": invalid name`},
		// Whichever server is listed first keeps the names; the other's error
		// names both servers.
		{"two servers, one name", "mcp_servers:\n  - name: a\n    url: " + bad.http.URL + "\n    prefix: p_\n  - name: b\n    url: " + bad.http.URL + "\n    prefix: p_\n",
			`tool "p_create_ticket": MCP server "`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConfig(t, "listen: 127.0.0.1:0\nstore:\n  path: "+filepath.Join(t.TempDir(), "gw.db")+"\n"+tc.config)
			var out strings.Builder
			err := Run(t.Context(), []string{"gateway", "-config", path}, func(string) string { return "" }, &out)
			if err == nil {
				t.Fatal("started with a bad config")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not name %q", err, tc.want)
			}
			if tc.name == "two servers, one name" && !(strings.Contains(err.Error(), `MCP server "a", tool "create_ticket"`) && strings.Contains(err.Error(), `MCP server "b", tool "create_ticket"`)) {
				t.Fatalf("clash error %q does not name both servers", err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error is not one line: %q", err)
			}
		})
	}
}

// TestMCPServerPolicyApplies checks that a server's replay_ttl reaches the
// records of its tools (seen through the admin API).
func TestMCPServerPolicyApplies(t *testing.T) {
	up := newMCPUpstream(t)
	token := "admin-token-for-policy-test"
	sum := sha256.Sum256([]byte(token))
	g := startGateway(t, "listen: 127.0.0.1:0\nstore:\n  path: "+filepath.Join(t.TempDir(), "gw.db")+`
admin:
  token_sha256: `+hex.EncodeToString(sum[:])+`
mcp_servers:
  - name: tickets
    url: `+up.http.URL+`
    prefix: t_
    replay_ttl: 72h
`)
	args := `{"title":"policy"}`
	if r := keyedCall(t, g.addr, "pol", 1, "t_create_ticket", args); r.status != 200 {
		t.Fatalf("call: %d %s", r.status, r.body)
	}
	key, _ := keyderive.Key("pol", 1, "t_create_ticket", []byte(args))
	req, _ := http.NewRequest(http.MethodGet, "http://"+g.addr+"/admin/v1/records/anonymous/t_create_ticket/"+key, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	r := do(t, req)
	var rec struct {
		State     string    `json:"state"`
		CreatedAt time.Time `json:"created_at"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	if err := json.Unmarshal(r.body, &rec); err != nil || r.status != 200 {
		t.Fatalf("admin record: %d %s", r.status, r.body)
	}
	if ttl := rec.ExpiresAt.Sub(rec.CreatedAt); rec.State != "COMPLETED" || ttl < 71*time.Hour || ttl > 73*time.Hour {
		t.Fatalf("record %s expires %v after creation, want the server's replay_ttl of 72h", rec.State, ttl)
	}
}
