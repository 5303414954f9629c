package mcpserver_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/toolgateway/toolgateway/gateway/gatewaytest"
	"github.com/toolgateway/toolgateway/gateway/mcpserver"
	"github.com/toolgateway/toolgateway/tools"
)

// mcpFuzzVersions are the protocol version headers FuzzMCPHandler picks
// from ("" sends none).
var mcpFuzzVersions = []string{"", "2025-11-25", "2026-07-28", "2025-03-26", "1999-01-01"}

// FuzzMCPHandler sends arbitrary bodies and identity headers to POST /mcp
// through the whole handler, backed by the embedded store, and checks: no
// panic; never a 5xx (the tools and the store are healthy, so every
// failure is the client's); every answer with a body is one JSON-RPC 2.0
// response (a result or an error, never plain text); and a tool runs only
// for a tools/call whose answer is a result.
//
//	go test -run '^$' -fuzz '^FuzzMCPHandler$' -fuzztime 30s ./gateway/mcpserver/
func FuzzMCPHandler(f *testing.F) {
	provision := newTestTool("provision")
	provision.Schema = `{"type":"object","properties":{"size":{"type":"integer","minimum":1}},"required":["size"]}`
	lookup := newTestTool("lookup")
	lookup.ReadOnly = true
	gw := gatewaytest.FuzzGateway(f, []tools.Tool{provision, lookup}, mcpserver.Mount(mcpserver.Options{}))

	call := func(args, meta string) []byte {
		return []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"provision","arguments":` + args + `,"_meta":` + meta + `}}`)
	}
	f.Add(call(`{"size":2}`, `{"io.github.toolgateway/sessionId":"s","io.github.toolgateway/stepIndex":1}`), uint8(1), "", "", "")
	f.Add(call(`{"size":2}`, `{"io.github.toolgateway/sessionId":"s","io.github.toolgateway/stepIndex":"1"}`), uint8(0), "s", "1", "")
	f.Add(call(`{"size":"x"}`, `{"io.github.toolgateway/sessionId":"s","io.github.toolgateway/stepIndex":2}`), uint8(1), "", "", "")
	f.Add(call(`{"size":2,"size":3}`, `{"io.github.toolgateway/sessionId":"s","io.github.toolgateway/stepIndex":3}`), uint8(1), "", "", "")
	f.Add(call(`[1]`, `{"io.github.toolgateway/sessionId":"s:1","io.github.toolgateway/stepIndex":-1}`), uint8(1), "t", "07", "k")
	f.Add(call(`{}`, `{"io.github.toolgateway/stepIndex":9007199254740992}`), uint8(1), "", "", "")
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"lookup"}}`), uint8(1), "", "", "")
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), uint8(1), "", "", "")
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"f","version":"1"}}}`), uint8(0), "", "", "")
	f.Add([]byte(`[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]`), uint8(0), "", "", "")
	f.Add([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), uint8(1), "", "", "")
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"nope"}`), uint8(2), "", "", "")
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`), uint8(1), "", "", "")
	f.Add([]byte(`not json`), uint8(1), "", "", "")
	f.Fuzz(func(t *testing.T, body []byte, version uint8, session, step, key string) {
		h := http.Header{
			"Content-Type": {"application/json"},
			"Accept":       {"application/json, text/event-stream"},
		}
		if v := mcpFuzzVersions[int(version)%len(mcpFuzzVersions)]; v != "" {
			h.Set("Mcp-Protocol-Version", v)
		}
		for name, v := range map[string]string{"Agent-Session-Id": session, "Agent-Step-Index": step, "Idempotency-Key": key} {
			if v != "" {
				h[name] = []string{v}
			}
		}
		req := gatewaytest.FuzzRequest(http.MethodPost, "/mcp", h, body)
		before := provision.Total.Load() + lookup.Total.Load()
		rec := httptest.NewRecorder()
		gw.ServeHTTP(rec, req)

		if rec.Code >= 500 {
			t.Fatalf("%d for a client's input: %s", rec.Code, rec.Body.Bytes())
		}
		if rec.Header().Get("X-Request-Id") == "" {
			t.Fatal("response without X-Request-Id")
		}
		ran := provision.Total.Load() + lookup.Total.Load() - before
		if rec.Body.Len() == 0 {
			if rec.Code != http.StatusAccepted || ran != 0 {
				t.Fatalf("empty %d answer, %d tool runs", rec.Code, ran)
			}
			return
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Fatalf("answer is %q, not JSON-RPC: %d %s", ct, rec.Code, rec.Body.Bytes())
		}
		var msg struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Result  json.RawMessage `json:"result"`
			Error   *struct {
				Code int64 `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &msg); err != nil || msg.JSONRPC != "2.0" || (msg.Result == nil) == (msg.Error == nil) {
			t.Fatalf("not one JSON-RPC response: %d %s", rec.Code, rec.Body.Bytes())
		}
		if ran > 0 && msg.Error != nil {
			t.Fatalf("a tool ran but the answer is error %d: %s", msg.Error.Code, rec.Body.Bytes())
		}
	})
}
