package gatewaycmd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/internal/testutil"
	"github.com/toolgateway/toolgateway/keyderive"
)

// started runs the gateway until the returned cancel is called.
type started struct {
	addr   string
	logs   *testutil.LockedBuffer
	cancel context.CancelFunc
	done   chan error
}

func startGateway(t *testing.T, configText string) *started {
	t.Helper()
	return startGatewayEnv(t, configText, func(string) string { return "" })
}

// startGatewayEnv is startGateway with getenv as the environment.
func startGatewayEnv(t *testing.T, configText string, getenv func(string) string) *started {
	t.Helper()
	path := writeConfig(t, configText)
	ctx, cancel := context.WithCancel(context.Background())
	s := &started{logs: &testutil.LockedBuffer{}, cancel: cancel, done: make(chan error, 1)}
	go func() {
		s.done <- Run(ctx, []string{"gateway", "-config", path}, getenv, s.logs)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for s.addr == "" {
		for _, l := range s.logs.JSONLines() {
			if l["msg"] == "gateway listening" {
				s.addr, _ = l["addr"].(string)
			}
		}
		select {
		case err := <-s.done:
			t.Fatalf("gateway exited at start: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("gateway did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Cleanup(func() {
		cancel()
		<-s.done
	})
	return s
}

func call(t *testing.T, addr, session string, step uint64, tool, args string) *http.Response {
	t.Helper()
	key, err := keyderive.Key(session, step, tool, []byte(args))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/api/tools/v1/"+tool, strings.NewReader(args))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Agent-Session-Id", session)
	req.Header.Set("Agent-Step-Index", itoa(step))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("call: %v", err)
	}
	return resp
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// TestShutdownDrainsAndRecordsTheOutcome starts the real program on the
// embedded store, cancels it (what SIGTERM does) while a tool runs, and
// checks the tool finishes, its outcome reaches the client and is recorded,
// the program exits cleanly, and a restarted gateway replays it.
func TestShutdownDrainsAndRecordsTheOutcome(t *testing.T) {
	dir := t.TempDir()
	config := "listen: 127.0.0.1:0\nstore:\n  path: " + filepath.Join(dir, "gw.db") + "\ndrain_timeout: 10s\n"
	g := startGateway(t, config)

	respCh := make(chan *http.Response, 1)
	go func() { respCh <- call(t, g.addr, "drain", 1, "cmdtest-slow", `{}`) }()
	waitFor(t, func() bool {
		r, err := http.Get("http://" + g.addr + "/metrics")
		if err != nil {
			return false
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return strings.Contains(string(b), `gateway_tools_in_flight{tool="cmdtest-slow"} 1`)
	})
	g.cancel() // SIGTERM
	time.Sleep(100 * time.Millisecond)
	select {
	case err := <-g.done:
		t.Fatalf("exited before the tool finished: %v", err)
	default:
	}
	testPlugin.release <- struct{}{}
	resp := <-respCh
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Idempotent-Replayed") != "false" {
		t.Fatalf("in-flight call during drain: %d %s", resp.StatusCode, body)
	}
	select {
	case err := <-g.done:
		if err != nil {
			t.Fatalf("Run returned %v after a clean drain", err)
		}
		g.done <- nil // for the cleanup
	case <-time.After(10 * time.Second):
		t.Fatal("did not exit after the drain")
	}

	// The outcome was recorded: a new gateway on the same file replays it.
	g2 := startGateway(t, config)
	again := call(t, g2.addr, "drain", 1, "cmdtest-slow", `{}`)
	body2, _ := io.ReadAll(again.Body)
	again.Body.Close()
	if again.StatusCode != 200 || again.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(body, body2) {
		t.Fatalf("after restart: %d replayed=%q %s", again.StatusCode, again.Header.Get("Idempotent-Replayed"), body2)
	}

	// One JSON log line per request, with the key's prefix only.
	key, _ := keyderive.Key("drain", 1, "cmdtest-slow", []byte(`{}`))
	var requests []map[string]any
	for _, l := range g2.logs.JSONLines() {
		if l["msg"] == "request" && l["route"] == "/api/tools/v1/{tool}" {
			requests = append(requests, l)
		}
	}
	if len(requests) != 1 {
		t.Fatalf("want 1 request log line, got %d", len(requests))
	}
	l := requests[0]
	for _, f := range []string{"request_id", "tenant", "tool", "key_prefix", "outcome", "status", "duration_ms"} {
		if _, ok := l[f]; !ok {
			t.Fatalf("log line lacks %s: %v", f, l)
		}
	}
	if l["outcome"] != "replayed" || l["key_prefix"] != key[:8] || l["tenant"] != "anonymous" || l["tool"] != "cmdtest-slow" {
		t.Fatalf("log line %v", l)
	}
	raw, _ := json.Marshal(g2.logs.JSONLines())
	if strings.Contains(string(raw), key) {
		t.Fatal("the full idempotency key appears in the logs")
	}
}

func TestVersionFlag(t *testing.T) {
	var out strings.Builder
	if err := Run(context.Background(), []string{"gateway", "-version"}, os.Getenv, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "gateway ") {
		t.Fatalf("version output %q", out.String())
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// gateway -h prints the usage with the environment variables and exits 0.
func TestHelpListsTheEnvironmentAndSucceeds(t *testing.T) {
	var out bytes.Buffer
	if err := Run(context.Background(), []string{"gateway", "-h"}, func(string) string { return "" }, &out); err != nil {
		t.Fatalf("-h: %v (a request for help is not an error)", err)
	}
	want := []string{"-config", "GATEWAY_ADDR", "REDIS_URL", "DATABASE_URL", "OTEL_EXPORTER_OTLP_ENDPOINT"}
	for _, c := range commands {
		want = append(want, "\n  "+c.name+" ")
	}
	for _, name := range []string{"key", "check", "health"} {
		want = append(want, "\n  "+name+" ")
	}
	for _, want := range want {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("usage lacks %s:\n%s", want, out.String())
		}
	}
}

// A bad DATABASE_URL is reported under the variable's name too.
func TestBadDatabaseURLNamesTheVariable(t *testing.T) {
	env := func(name string) string {
		if name == "DATABASE_URL" {
			return "postgres://gw@127.0.0.1:notaport/gw"
		}
		return ""
	}
	err := Run(context.Background(), []string{"gateway"}, env, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "DATABASE_URL") || strings.Contains(err.Error(), "store.postgres_url") {
		t.Fatalf("error = %v; want it to name DATABASE_URL", err)
	}
	// The same URL written in the file is reported under the file's field.
	err = Run(context.Background(), []string{"gateway", "-config", writeConfig(t, "store:\n  postgres_url: postgres://gw@127.0.0.1:notaport/gw\n")}, func(string) string { return "" }, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "store.postgres_url") || strings.Contains(err.Error(), "DATABASE_URL:") {
		t.Fatalf("error = %v; want it to name store.postgres_url", err)
	}
}

// A bad REDIS_URL is reported under the variable's name, not the config
// field the user never wrote.
func TestBadRedisURLNamesTheVariable(t *testing.T) {
	env := func(name string) string {
		if name == "REDIS_URL" {
			return "127.0.0.1:6379" // no scheme
		}
		return ""
	}
	err := Run(context.Background(), []string{"gateway"}, env, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "REDIS_URL") || strings.Contains(err.Error(), "store.redis_url") {
		t.Fatalf("error = %v; want it to name REDIS_URL", err)
	}
}

// With admin_listen, /healthz, /readyz, /metrics and /admin are served on
// that listener only, and the tool API on listen only.
func TestAdminListenSeparatesOperations(t *testing.T) {
	g := startGateway(t, "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nstore:\n  path: "+filepath.Join(t.TempDir(), "gw.db")+
		"\nadmin:\n  token_sha256: "+tokenHash("adm")+"\n")
	var opsAddr string
	for _, l := range g.logs.JSONLines() {
		if l["msg"] == "gateway listening" {
			opsAddr, _ = l["admin_addr"].(string)
		}
	}
	if opsAddr == "" || opsAddr == g.addr {
		t.Fatalf("admin_addr %q in the start-up line (listen %s)", opsAddr, g.addr)
	}
	get := func(addr, path string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		req.Header.Set("Authorization", "Bearer adm")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if resp := call(t, g.addr, "ops", 1, "reloadtest", `{}`); resp.StatusCode != 200 {
		t.Fatalf("tool call on listen: %d", resp.StatusCode)
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics", "/admin/v1/records?state=UNKNOWN"} {
		if st, _ := get(g.addr, path); st != http.StatusNotFound {
			t.Errorf("%s on listen: %d, want 404", path, st)
		}
		if st, body := get(opsAddr, path); st != http.StatusOK {
			t.Errorf("%s on admin_listen: %d %s", path, st, body)
		}
	}
	if _, body := get(opsAddr, "/metrics"); !strings.Contains(body, `gateway_requests_total{api="rest",outcome="executed",tool="reloadtest"} 1`) {
		t.Errorf("metrics on admin_listen do not count the call:\n%s", body)
	}
	if st, _ := get(opsAddr, "/api/tools/v1"); st != http.StatusNotFound {
		t.Errorf("tool API on admin_listen: %d, want 404", st)
	}
}

// closedAfterResponse reads one response from conn and reports whether the
// server then closed the connection (EOF) before the deadline.
func closedAfterResponse(t *testing.T, conn net.Conn) (*http.Response, bool) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	_, err = br.ReadByte()
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return resp, false
	}
	return resp, err != nil
}

// A request with both Content-Length and Transfer-Encoding (a request
// smuggling shape behind a proxy that trusts Content-Length) is processed
// by Transfer-Encoding alone, and the connection is closed after the
// response (RFC 9112 §6.1). net/http drops Content-Length before a handler
// sees it, so every chunked request closes its connection.
func TestChunkedRequestClosesTheConnection(t *testing.T) {
	g := startGateway(t, "listen: 127.0.0.1:0\nstore:\n  path: "+filepath.Join(t.TempDir(), "gw.db")+"\nserver:\n  read_timeout: 30s\n"+echoUpstream(t))
	args := `{"message":"hi"}`
	key, err := keyderive.Key("s", 1, "echo", []byte(args))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", g.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	chunk := strings.ToUpper(strings.TrimPrefix(itoaHex(len(args)), "0x"))
	_, err = io.WriteString(conn, "POST /api/tools/v1/echo HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"+
		"Idempotency-Key: "+key+"\r\nAgent-Session-Id: s\r\nAgent-Step-Index: 1\r\n"+
		"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"+chunk+"\r\n"+args+"\r\n0\r\n\r\n")
	if err != nil {
		t.Fatal(err)
	}
	resp, closed := closedAfterResponse(t, conn)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if !closed {
		t.Fatal("the connection stayed open after a request with Content-Length and Transfer-Encoding")
	}
}

// A chunked body over max_body_bytes gets its 413 and the connection is
// closed at once, not when read_timeout ends.
func TestOversizedChunkedBodyClosesAtOnce(t *testing.T) {
	g := startGateway(t, "listen: 127.0.0.1:0\nstore:\n  path: "+filepath.Join(t.TempDir(), "gw.db")+
		"\nserver:\n  read_timeout: 60s\nidempotency:\n  max_body_bytes: 1024\n"+echoUpstream(t))
	conn, err := net.Dial("tcp", g.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// 4 KiB in one chunk, then the client stalls: no terminating chunk.
	_, err = io.WriteString(conn, "POST /api/tools/v1/echo HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"+
		"Transfer-Encoding: chunked\r\n\r\n1000\r\n"+strings.Repeat("x", 4096)+"\r\n")
	if err != nil {
		t.Fatal(err)
	}
	resp, closed := closedAfterResponse(t, conn)
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d, want 413", resp.StatusCode)
	}
	if !closed {
		t.Fatal("the connection stayed open after the 413")
	}
}

// echoUpstream configures tool "echo" as an HTTP upstream answering {}.
func echoUpstream(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, "{}")
	}))
	t.Cleanup(srv.Close)
	return "tools:\n  - name: echo\n    http:\n      url: " + srv.URL + "\n"
}

func itoaHex(n int) string {
	const digits = "0123456789abcdef"
	if n == 0 {
		return "0"
	}
	var out []byte
	for ; n > 0; n /= 16 {
		out = append([]byte{digits[n%16]}, out...)
	}
	return string(out)
}
