package gateway_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// rawExchange writes raw bytes to the server and reads one response. It
// lets a test send what net/http's client refuses to (CR/LF or NUL inside
// header values, folded lines, conflicting lengths) and stall mid-body.
func rawExchange(t *testing.T, addr, raw string) (*http.Response, []byte) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A response must come without the client sending anything more: a
	// deadline turns a server waiting for the rest of a body into a failure.
	if err := conn.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatalf("write: %v", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no response: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

// TestRawWireHostileRequests sends byte-level malformed requests over a
// socket. Those net/http itself rejects get its plain 400 before the gateway
// sees them (code ""); the rest get the gateway's problem. Either way the
// tool never runs and the store is never called.
func TestRawWireHostileRequests(t *testing.T) {
	tool := newTestTool("provision")
	tool.schema = hostileSchema
	store := &countingStore{Store: newStore(t, storeEmbedded)}
	h := newHarness(t, storeEmbedded, []tools.Tool{tool}, withStore(store))
	addr := strings.TrimPrefix(h.srv.URL, "http://")
	good := `{"size":2}`
	key := derivedKey(t, "s", 1, "provision", good)

	request := func(extraHeaders, body string) string {
		return "POST /api/tools/v1/provision HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n" +
			"Agent-Session-Id: s\r\nAgent-Step-Index: 1\r\n" + extraHeaders +
			fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body)) + body
	}
	withKey := "Idempotency-Key: " + key + "\r\n"

	cases := []struct {
		name   string
		raw    string
		status int
		code   string // "" when net/http refuses the request itself
	}{
		{"CR inside a header value", request("Idempotency-Key: "+key+"\rX-Evil: 1\r\n", good), 400, ""},
		{"NUL inside a header value", request("Idempotency-Key: "+key+"\x00\r\n", good), 400, ""},
		// net/http unfolds the line into "<key> continued", which is no key.
		{"obsolete line folding", request("Idempotency-Key: "+key+"\r\n continued\r\n", good), 400, wire.CodeIdempotencyKeyMalformed},
		{"space in a header name", request("Idempotency Key: "+key+"\r\n", good), 400, ""},
		{"header without colon", request(withKey+"X-Broken\r\n", good), 400, ""},
		{"two different Content-Length", "POST /api/tools/v1/provision HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n" +
			withKey + "Content-Length: 10\r\nContent-Length: 11\r\n\r\n" + good, 400, ""},
		{"negative Content-Length", "POST /api/tools/v1/provision HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n" +
			withKey + "Content-Length: -1\r\n\r\n" + good, 400, ""},
		{"raw non-ASCII look-alike in the path", "POST /api/tools/v1/prоvision HTTP/1.1\r\nHost: gw\r\n\r\n", 404, wire.CodeToolNotFound},
		{"bare LF smuggles a second key", request("Idempotency-Key: "+key+"\nIdempotency-Key: "+key+"\r\n", good), 400, wire.CodeIdempotencyKeyMalformed},
		{"two key headers in different case", request("idempotency-key: "+key+"\r\nIDEMPOTENCY-KEY: "+key+"\r\n", good), 400, wire.CodeIdempotencyKeyMalformed},
		{"10 MiB declared, 1 KiB sent", "POST /api/tools/v1/provision HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n" +
			withKey + "Agent-Session-Id: s\r\nAgent-Step-Index: 1\r\nContent-Length: 10485760\r\n\r\n{\"s\":\"" + strings.Repeat("x", 1024), 413, wire.CodePayloadTooLarge},
		{"chunked body over the cap, then silence", "POST /api/tools/v1/provision HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n" +
			withKey + "Agent-Session-Id: s\r\nAgent-Step-Index: 1\r\nTransfer-Encoding: chunked\r\n\r\n" +
			fmt.Sprintf("%x\r\n", gateway.DefaultMaxBodyBytes+16) + strings.Repeat("x", gateway.DefaultMaxBodyBytes+16) + "\r\n", 413, wire.CodePayloadTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := rawExchange(t, addr, tc.raw)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			if tc.code == "" {
				if resp.Header.Get("X-Request-Id") != "" {
					t.Fatalf("expected net/http to refuse this before the gateway; got %s", body)
				}
				return
			}
			wantProblem(t, response{status: resp.StatusCode, header: resp.Header, body: body}, tc.status, tc.code)
		})
	}
	if n := store.calls.Load(); n != 0 {
		t.Fatalf("raw hostile requests made %d store calls", n)
	}
	if n := tool.total.Load(); n != 0 {
		t.Fatalf("the tool ran %d times", n)
	}
}
