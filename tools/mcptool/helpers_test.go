package mcptool_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/internal/mcptest"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/tools/mcptool"
)

// httpUpstream serves a fresh mcptest server over Streamable HTTP on
// loopback. down, while true, makes every request fail with 503 (a server
// that is not up yet).
type httpUpstream struct {
	srv  *mcptest.Server
	http *httptest.Server
	down atomic.Bool
	// seen counts requests and keeps the last Authorization header.
	mu   sync.Mutex
	auth string
}

func newHTTPUpstream(t *testing.T, opts mcptest.Options) *httpUpstream {
	t.Helper()
	return newHTTPUpstreamWith(t, opts, nil)
}

func newHTTPUpstreamWith(t *testing.T, opts mcptest.Options, httpOpts *mcp.StreamableHTTPOptions) *httpUpstream {
	t.Helper()
	s, err := mcptest.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	u := &httpUpstream{srv: s}
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.MCP() }, httpOpts)
	u.http = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u.down.Load() {
			http.Error(w, "not up yet", http.StatusServiceUnavailable)
			return
		}
		u.mu.Lock()
		u.auth = r.Header.Get("Authorization")
		u.mu.Unlock()
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(u.http.Close)
	return u
}

func (u *httpUpstream) lastAuth() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.auth
}

// startManager builds and starts a Manager over reg and stops it at the end.
func startManager(t *testing.T, reg *tools.Registry, cfg mcptool.ServerConfig, opts mcptool.Options) *mcptool.Manager {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	m, err := mcptool.NewManager(reg, []mcptool.ServerConfig{cfg}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return m
}

// testWriter sends log lines to t.Log (dropped after the test ended).
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	defer func() { _ = recover() }() // a log line after the test returned
	w.t.Log(string(p))
	return len(p), nil
}

// stdioServerBinary is the mcptestserver program, built once per run.
var stdioServerBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "mcptestserver")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "mcptestserver")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/toolgateway/toolgateway/internal/mcptest/mcptestserver")
	cmd.Stderr = os.Stderr
	return bin, cmd.Run()
})

func stdioBinary(t *testing.T) string {
	t.Helper()
	bin, err := stdioServerBinary()
	if err != nil {
		t.Fatalf("build mcptestserver: %v", err)
	}
	return bin
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func lookup(t *testing.T, reg *tools.Registry, name string) *tools.Entry {
	t.Helper()
	e, ok := reg.Lookup(name)
	if !ok {
		t.Fatalf("tool %q not in the registry", name)
	}
	return e
}
