package gatewaycmd

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/keyderive"
)

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
