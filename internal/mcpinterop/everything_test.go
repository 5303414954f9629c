package mcpinterop

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/gatewaycmd"
	"github.com/toolgateway/toolgateway/internal/testutil"
	"github.com/toolgateway/toolgateway/keyderive"
)

// everythingEntry is the server's launcher, installed by npm ci.
func everythingEntry(t *testing.T) string {
	t.Helper()
	entry, err := filepath.Abs(filepath.Join("everything", "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(entry); err != nil {
		t.Skip("internal/mcpinterop/everything/node_modules is missing: run `npm ci` in internal/mcpinterop/everything (.ci/run does) to test against @modelcontextprotocol/server-everything")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed: the server-everything interop tests need Node 20")
	}
	return entry
}

// startGateway runs the gateway program with config until the test ends
// and returns its address.
func startGateway(t *testing.T, config string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &testutil.LockedBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- gatewaycmd.Run(ctx, []string{"gateway", "-config", path}, func(string) string { return "" }, logs)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		if l := logs.Find("gateway listening"); l != nil {
			return l["addr"].(string)
		}
		select {
		case err := <-done:
			t.Fatalf("gateway exited at start: %v\n%s", err, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("gateway did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

func callTool(t *testing.T, addr, session string, step uint64, tool, args string) reply {
	t.Helper()
	key, err := keyderive.Key(session, step, tool, []byte(args))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/api/tools/v1/"+tool, strings.NewReader(args))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Agent-Session-Id", session)
	req.Header.Set("Agent-Step-Index", fmt.Sprint(step))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: body}
}

// checkEverything lists the gateway's tools and calls get-sum twice.
func checkEverything(t *testing.T, addr string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/api/tools/v1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var catalog struct {
		Tools []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&catalog); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tool := range catalog.Tools {
		names[tool.Name] = true
	}
	for _, want := range []string{"ev_echo", "ev_get-sum"} {
		if !names[want] {
			t.Fatalf("discovery lacks %s: %v", want, names)
		}
	}
	for name := range names {
		if !strings.HasPrefix(name, "ev_") {
			t.Fatalf("tool %s without the prefix", name)
		}
	}
	t.Logf("server-everything tools: %d", len(names))

	session := fmt.Sprintf("everything-%d", time.Now().UnixNano())
	// get-sum is readOnlyHint: served read-only (no key needed, runs each time).
	sum := callTool(t, addr, session, 1, "ev_get-sum", `{"a":2,"b":40}`)
	if sum.status != 200 || sum.header.Get("Idempotent-Replayed") != "" || !strings.Contains(string(sum.body), "42") {
		t.Fatalf("get-sum: %d %s", sum.status, sum.body)
	}
	// toggle-simulated-logging mutates (it answers Started, then Stopped):
	// its replay is the first answer, byte for byte, and runs nothing.
	first := callTool(t, addr, session, 2, "ev_toggle-simulated-logging", `{}`)
	if first.status != 200 || first.header.Get("Idempotent-Replayed") != "false" || !strings.Contains(string(first.body), "Started simulated") {
		t.Fatalf("toggle-simulated-logging: %d %s", first.status, first.body)
	}
	replay := callTool(t, addr, session, 2, "ev_toggle-simulated-logging", `{}`)
	if replay.status != 200 || replay.header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(replay.body, first.body) ||
		replay.header.Get("Tool-Execution-Id") != first.header.Get("Tool-Execution-Id") {
		t.Fatalf("replay: %d %s %s, want the first answer byte for byte", replay.status, replay.header.Get("Idempotent-Replayed"), replay.body)
	}
	// The server's schema is enforced by the gateway before forwarding.
	if bad := callTool(t, addr, session, 3, "ev_get-sum", `{"a":"two","b":40}`); bad.status != 400 {
		t.Fatalf("arguments against the server's schema: %d %s", bad.status, bad.body)
	}
}

func TestServerEverythingOverStdio(t *testing.T) {
	entry := everythingEntry(t)
	addr := startGateway(t, "listen: 127.0.0.1:0\nstore:\n  path: "+filepath.Join(t.TempDir(), "gw.db")+`
mcp_servers:
  - name: everything
    command: [node, `+entry+`, stdio]
    prefix: ev_
`)
	checkEverything(t, addr)
}

func TestServerEverythingOverStreamableHTTP(t *testing.T) {
	entry := everythingEntry(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command("node", entry, "streamableHttp")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr := &testutil.LockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server-everything did not listen on %d: %s", port, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	addr := startGateway(t, "listen: 127.0.0.1:0\nstore:\n  path: "+filepath.Join(t.TempDir(), "gw.db")+`
mcp_servers:
  - name: everything
    url: `+fmt.Sprintf("http://127.0.0.1:%d/mcp", port)+`
    prefix: ev_
`)
	checkEverything(t, addr)
}
