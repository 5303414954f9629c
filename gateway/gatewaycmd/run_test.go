package gatewaycmd

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
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
	path := writeConfig(t, configText)
	ctx, cancel := context.WithCancel(context.Background())
	s := &started{logs: &testutil.LockedBuffer{}, cancel: cancel, done: make(chan error, 1)}
	go func() {
		s.done <- Run(ctx, []string{"gateway", "-config", path}, func(string) string { return "" }, s.logs)
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
