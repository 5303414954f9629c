package mcpserver_test

import (
	"net/http"
	"testing"

	"github.com/toolgateway/toolgateway/tools"
)

// TestMCPRefusesWhatIsNotOneRequest sends what no real client sends: each
// gets a JSON-RPC error (never plain text), and nothing runs.
func TestMCPRefusesWhatIsNotOneRequest(t *testing.T) {
	tool := newTestTool("provision")
	h := newHarness(t, storeEmbedded, []tools.Tool{tool})
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"provision","arguments":{},"_meta":{"io.github.toolgateway/sessionId":"s","io.github.toolgateway/stepIndex":1}}}`
	cases := []struct {
		name    string
		body    string
		version string
		header  http.Header
		status  int
		code    int64
	}{
		{"not JSON", `{"jsonrpc":"2.0",`, "2025-11-25", nil, 400, -32700},
		{"not JSON, no version", `tools/call provision`, "", nil, 400, -32700},
		{"JSON but not JSON-RPC", `{"hello":"world"}`, "2025-11-25", nil, 400, -32600},
		{"wrong jsonrpc version", `{"jsonrpc":"1.0","id":1,"method":"tools/list"}`, "2025-11-25", nil, 400, -32600},
		{"a JSON string", `"tools/call"`, "2025-11-25", nil, 400, -32600},
		{"batch", "[" + call + "]", "2025-11-25", nil, 400, -32600},
		// go-sdk would run a batch sent without a protocol version header.
		{"batch, no version", "[" + call + "," + call + "]", "", nil, 400, -32600},
		{"batch, 2025-03-26", "[" + call + "]", "2025-03-26", nil, 400, -32600},
		{"empty batch", `[]`, "", nil, 400, -32600},
		{"unknown method", `{"jsonrpc":"2.0","id":7,"method":"tools/run","params":{"name":"provision"}}`, "2025-11-25", nil, 200, -32601},
		{"unknown method, 2026-07-28", `{"jsonrpc":"2.0","id":7,"method":"tools/run","params":{"name":"provision"}}`, "2026-07-28", nil, 404, -32601},
		{"unknown notification", `{"jsonrpc":"2.0","method":"notifications/tools/call"}`, "2025-11-25", nil, 200, -32601},
		{"a response", `{"jsonrpc":"2.0","id":1,"result":{}}`, "2025-11-25", nil, 400, -32600},
		{"tools/call without id", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"provision","arguments":{},"_meta":{"io.github.toolgateway/sessionId":"s","io.github.toolgateway/stepIndex":1}}}`, "2025-11-25", nil, 400, -32600},
		{"tools/call without params", `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`, "2025-11-25", nil, 400, -32600},
		{"text/plain", call, "2025-11-25", http.Header{"Content-Type": {"text/plain"}}, 415, -32600},
		{"unsupported protocol version", call, "1999-01-01", nil, 400, -32600},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := h.RawMCP(c.body, c.version, c.header)
			if r.Status != c.status {
				t.Fatalf("status %d, want %d: %s", r.Status, c.status, r.Body)
			}
			if ct := r.Header.Get("Content-Type"); ct != "application/json" {
				t.Fatalf("Content-Type %q: %s", ct, r.Body)
			}
			if code, _ := rpcErrorOf(t, r); code != c.code {
				t.Fatalf("JSON-RPC code %d, want %d: %s", code, c.code, r.Body)
			}
		})
	}
	if n := tool.Total.Load(); n != 0 {
		t.Fatalf("the tool ran %d times", n)
	}
}
