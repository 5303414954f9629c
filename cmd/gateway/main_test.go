package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/keyderive"
)

// TestMain turns the test binary into the gateway itself when the parent
// test asks for it, so the tests below can kill -9 a real gateway process.
func TestMain(m *testing.M) {
	if os.Getenv("GATEWAY_TEST_CHILD") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// gatewayProcess is the gateway running as a child process.
type gatewayProcess struct {
	cmd  *exec.Cmd
	addr string
	logs *bytes.Buffer
}

func startProcess(t *testing.T, args ...string) *gatewayProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "GATEWAY_TEST_CHILD=1", "GATEWAY_ADDR=127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &gatewayProcess{cmd: cmd, logs: &bytes.Buffer{}}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		p.logs.Write(append(lines.Bytes(), '\n'))
		var l map[string]any
		if json.Unmarshal(lines.Bytes(), &l) == nil && l["msg"] == "gateway listening" {
			p.addr = l["addr"].(string)
			break
		}
	}
	if p.addr == "" {
		t.Fatalf("gateway did not start: %s", p.logs)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	return p
}

func (p *gatewayProcess) call(t *testing.T, session string, step uint64, tool, args string) (int, http.Header, []byte) {
	t.Helper()
	key, err := keyderive.Key(session, step, tool, []byte(args))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+p.addr+"/api/tools/v1/"+tool, strings.NewReader(args))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Agent-Session-Id", session)
	req.Header.Set("Agent-Step-Index", strconv.FormatUint(step, 10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, body
}

// TestKillNineLosesNoCompletedRecord runs the gateway binary's code in a
// child process on the embedded store, completes calls, kills it with
// SIGKILL, starts it again on the same file and checks every completed call
// replays byte for byte.
func TestKillNineLosesNoCompletedRecord(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(config, []byte("store:\n  path: data/gw.db\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	first := startProcess(t, "-config", config)
	bodies := map[string][]byte{}
	for _, session := range []string{"a", "b", "c", "d", "e"} {
		args := `{"name":"web-` + session + `","region":"eu-west-1","cpus":2}`
		status, h, body := first.call(t, session, 0, "provision-infra", args)
		if status != 200 && status != 201 {
			t.Fatalf("provision %s: %d %s", session, status, body)
		}
		if h.Get("Idempotent-Replayed") != "false" {
			t.Fatalf("first call replayed")
		}
		bodies[session] = body
	}
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.cmd.Wait()

	second := startProcess(t, "-config", config)
	for session, want := range bodies {
		args := `{"name":"web-` + session + `","region":"eu-west-1","cpus":2}`
		_, h, body := second.call(t, session, 0, "provision-infra", args)
		if h.Get("Idempotent-Replayed") != "true" || !bytes.Equal(body, want) {
			t.Fatalf("after kill -9, session %s: replayed=%q %s, want %s", session, h.Get("Idempotent-Replayed"), body, want)
		}
	}
}

// TestSigtermExitsZero checks the process exits 0 on SIGTERM.
func TestSigtermExitsZero(t *testing.T) {
	p := startProcess(t, "-config", writeEmptyConfig(t))
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no exit after SIGTERM")
	}
}

func writeEmptyConfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(path, []byte("store:\n  path: gw.db\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSighupReloadsTheConfig sends a real SIGHUP to the gateway process
// after adding a tenant to its config file: the new tenant's token is let
// in, the old one still is, and the process still exits 0 on SIGTERM.
func TestSighupReloadsTheConfig(t *testing.T) {
	hash := func(token string) string {
		sum := sha256.Sum256([]byte(token))
		return hex.EncodeToString(sum[:])
	}
	dir := t.TempDir()
	config := filepath.Join(dir, "gateway.yaml")
	tenants := "store:\n  path: gw.db\nauth:\n  tenants:\n    - name: acme\n      token_sha256: " + hash("acme-token") + "\n"
	if err := os.WriteFile(config, []byte(tenants), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProcess(t, "-config", config)
	callAs := func(token string, step uint64) int {
		key, _ := keyderive.Key("hup", step, "echo", []byte(`{}`))
		req, _ := http.NewRequest(http.MethodPost, "http://"+p.addr+"/api/tools/v1/echo", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("Agent-Session-Id", "hup")
		req.Header.Set("Agent-Step-Index", strconv.FormatUint(step, 10))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := callAs("beta-token", 1); st != 401 {
		t.Fatalf("beta before the reload: %d, want 401", st)
	}

	tenants += "    - name: beta\n      token_sha256: " + hash("beta-token") + "\n"
	if err := os.WriteFile(config, []byte(tenants), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	// A 401 touches nothing, so beta may knock until the reload is done.
	deadline := time.Now().Add(10 * time.Second)
	for callAs("beta-token", 1) != 200 {
		if time.Now().After(deadline) {
			t.Fatal("beta still refused 10s after the SIGHUP")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st := callAs("acme-token", 2); st != 200 {
		t.Fatalf("acme after the reload: %d", st)
	}

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGHUP then SIGTERM: %v", err)
	}
}
