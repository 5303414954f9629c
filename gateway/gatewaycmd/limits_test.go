package gatewaycmd

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestServerLimitsDefaultsAndOverrides(t *testing.T) {
	cfg, err := ParseConfig([]byte("listen: 127.0.0.1:0\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.withDefaults()
	if got := cfg.Server; time.Duration(got.ReadHeaderTimeout) != DefaultReadHeaderTimeout || time.Duration(got.ReadTimeout) != DefaultReadTimeout ||
		time.Duration(got.IdleTimeout) != DefaultIdleTimeout || got.MaxHeaderBytes != DefaultMaxHeaderBytes {
		t.Fatalf("defaults %+v", got)
	}
	cfg, err = ParseConfig([]byte("server:\n  read_header_timeout: 2s\n  read_timeout: 30s\n  idle_timeout: 1m\n  max_header_bytes: 8192\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.withDefaults()
	if got := cfg.Server; time.Duration(got.ReadHeaderTimeout) != 2*time.Second || time.Duration(got.ReadTimeout) != 30*time.Second ||
		time.Duration(got.IdleTimeout) != time.Minute || got.MaxHeaderBytes != 8192 {
		t.Fatalf("overrides %+v", got)
	}
	for _, bad := range []string{"server:\n  read_timeout: -1s\n", "server:\n  read_timeot: 1s\n", "server:\n  max_header_bytes: lots\n"} {
		if _, err := ParseConfig([]byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

// TestServerLimitsAreEnforced runs the real program with small limits: a
// request with oversized headers gets 431, and a client that stops in the
// middle of its headers is disconnected after read_header_timeout.
func TestServerLimitsAreEnforced(t *testing.T) {
	dir := t.TempDir()
	g := startGateway(t, "listen: 127.0.0.1:0\nstore:\n  path: "+filepath.Join(dir, "gw.db")+
		"\nserver:\n  read_header_timeout: 300ms\n  max_header_bytes: 4096\n")

	req, _ := http.NewRequest(http.MethodGet, "http://"+g.addr+"/healthz", nil)
	req.Header.Set("X-Pad", strings.Repeat("p", 16<<10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("16 KiB of headers: %d, want 431", resp.StatusCode)
	}

	conn, err := net.Dial("tcp", g.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST /api/tools/v1/x HTTP/1.1\r\nHost: gw\r\nIdempotency-Key: "); err != nil {
		t.Fatal(err)
	}
	// The default read_header_timeout is 10 s; the configured 300 ms must
	// close the connection long before this deadline.
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = io.ReadAll(conn)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("a client stalled in its headers was not disconnected")
	}
}
