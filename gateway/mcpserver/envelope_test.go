package mcpserver_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/internal/mcptest"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/tools/mcptool"
	"github.com/toolgateway/toolgateway/wire"
)

// rpcAnswer is a JSON-RPC answer as raw HTTP received it.
type rpcAnswer struct {
	ID    json.RawMessage `json:"id"`
	Error *struct {
		Code    int64           `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
	Result json.RawMessage `json:"result"`
}

func decodeAnswer(t *testing.T, r response) rpcAnswer {
	t.Helper()
	var a rpcAnswer
	if err := json.Unmarshal(r.Body, &a); err != nil {
		t.Fatalf("answer is not JSON-RPC: %d %s", r.Status, r.Body)
	}
	return a
}

// callBody is a tools/call of provision with a valid identity, its parts
// spliced in as raw JSON.
func callBody(id, params string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":` + params + `}`
}

const envelopeParams = `{"name":"provision","arguments":{"size":1},"_meta":{"io.github.toolgateway/sessionId":"env","io.github.toolgateway/stepIndex":1}}`

// TestMCPStrictEnvelope posts raw messages (the envelope is what is under
// test): trailing data is a parse error, duplicate member names in the
// envelope, params or _meta are an invalid request, a request id must be a
// string or an integer within ±(2^53−1) other than -0 (so the answer's id
// is the request's as sent), and none of them runs the tool.
func TestMCPStrictEnvelope(t *testing.T) {
	tool := newTestTool("provision")
	h := newHarness(t, storeEmbedded, []tools.Tool{tool})
	for _, c := range []struct {
		name, body string
		code       int64
	}{
		{"trailing message", callBody("1", envelopeParams) + ` {"jsonrpc":"2.0","id":2,"method":"tools/list"}`, -32700},
		{"trailing garbage", callBody("1", envelopeParams) + `x`, -32700},
		{"duplicate method", `{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call","params":` + envelopeParams + `}`, -32600},
		{"duplicate id", `{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":` + envelopeParams + `}`, -32600},
		{"duplicate name in params", callBody("1", `{"name":"other","name":"provision","arguments":{"size":1},"_meta":{"io.github.toolgateway/sessionId":"env","io.github.toolgateway/stepIndex":1}}`), -32600},
		{"duplicate name, escaped", callBody("1", `{"name":"provision","n\u0061me":"provision","arguments":{"size":1}}`), -32600},
		{"duplicate _meta member", callBody("1", `{"name":"provision","arguments":{"size":1},"_meta":{"io.github.toolgateway/sessionId":"a","io.github.toolgateway/sessionId":"env","io.github.toolgateway/stepIndex":1}}`), -32600},
		{"id with a fraction", callBody("1.5", envelopeParams), -32600},
		{"id 1.0", callBody("1.0", envelopeParams), -32600},
		{"id with an exponent", callBody("1e3", envelopeParams), -32600},
		{"id 2^53", callBody("9007199254740992", envelopeParams), -32600},
		{"id -2^53", callBody("-9007199254740992", envelopeParams), -32600},
		// go-sdk reads an id number as an integer: -0 would come back as 0.
		{"id -0", callBody("-0", envelopeParams), -32600},
		{"id true", callBody("true", envelopeParams), -32600},
		{"id null", callBody("null", envelopeParams), -32600},
		{"id an object", callBody(`{"a":1}`, envelopeParams), -32600},
		{"id a 257-byte string", callBody(`"`+strings.Repeat("i", 257)+`"`, envelopeParams), -32600},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := h.RawMCP(c.body, "2025-11-25", nil)
			a := decodeAnswer(t, r)
			if r.Status != http.StatusBadRequest || a.Error == nil || a.Error.Code != c.code || string(a.ID) != "null" {
				t.Fatalf("answer %d %s, want HTTP 400, error %d, id null", r.Status, r.Body, c.code)
			}
		})
	}
	if n := tool.Total.Load(); n != 0 {
		t.Fatalf("the tool ran %d times on refused messages", n)
	}
	// The ids at the edges come back exactly as sent.
	for step, id := range []string{"9007199254740991", "-9007199254740991", "0", `"req-1"`} {
		params := strings.Replace(envelopeParams, `"stepIndex":1`, `"stepIndex":`+string(rune('2'+step)), 1)
		r := h.RawMCP(callBody(id, params), "2025-11-25", nil)
		a := decodeAnswer(t, r)
		if a.Error != nil || string(a.ID) != id {
			t.Fatalf("id %s: answer %s", id, r.Body)
		}
	}
}

// TestMCPStepIndexIntegerOnly: a _meta stepIndex of 3.0 or 3.5 is
// agent_step_malformed (-32602); 3 and "3" are step 3.
func TestMCPStepIndexIntegerOnly(t *testing.T) {
	tool := newTestTool("provision")
	h := newHarness(t, storeEmbedded, []tools.Tool{tool})
	for _, step := range []string{"3.0", "3.5", "3e0", "-0"} {
		r := h.RawMCP(callBody("1", `{"name":"provision","arguments":{},"_meta":{"io.github.toolgateway/sessionId":"int","io.github.toolgateway/stepIndex":`+step+`}}`), "2025-11-25", nil)
		a := decodeAnswer(t, r)
		if a.Error == nil || a.Error.Code != wire.RPCInvalidParams || !strings.Contains(string(a.Error.Data), wire.CodeAgentStepMalformed) {
			t.Fatalf("stepIndex %s: %s", step, r.Body)
		}
	}
	for _, step := range []string{"3", `"3"`} {
		r := h.RawMCP(callBody("1", `{"name":"provision","arguments":{},"_meta":{"io.github.toolgateway/sessionId":"int","io.github.toolgateway/stepIndex":`+step+`}}`), "2025-11-25", nil)
		if a := decodeAnswer(t, r); a.Error != nil {
			t.Fatalf("stepIndex %s: %s", step, r.Body)
		}
	}
	if n := tool.Total.Load(); n != 1 {
		t.Fatalf("the tool ran %d times, want 1 (step 3, then its replay)", n)
	}
}

// TestMCPErrorsEchoAtMost256Bytes: no error repeats more than 256 bytes of
// the request: go-sdk's "invalid params" (which quotes the params) and
// the canonical arguments of idempotency_key_mismatch are cut.
func TestMCPErrorsEchoAtMost256Bytes(t *testing.T) {
	tool := newTestTool("provision")
	h := newHarness(t, storeEmbedded, []tools.Tool{tool})
	big := strings.Repeat("x", 900<<10)
	for name, body := range map[string]string{
		"params of the wrong shape":  callBody("1", `{"name":5,"arguments":"`+big+`"}`),
		"_meta not an object":        callBody("1", `{"name":"provision","_meta":"`+big+`"}`),
		"key mismatch on large args": callBody("1", `{"name":"provision","arguments":{"blob":"`+big+`"},"_meta":{"io.github.toolgateway/sessionId":"echo","io.github.toolgateway/stepIndex":1,"io.github.toolgateway/idempotencyKey":"`+strings.Repeat("ab", 32)+`"}}`),
		"a long unknown tool name":   callBody("1", `{"name":"`+big+`","arguments":{}}`),
	} {
		t.Run(name, func(t *testing.T) {
			r := h.RawMCP(body, "2025-11-25", nil)
			a := decodeAnswer(t, r)
			if a.Error == nil {
				t.Fatalf("no error: %.300s", r.Body)
			}
			if strings.Contains(string(r.Body), strings.Repeat("x", 257)) || len(r.Body) > 2048 {
				t.Fatalf("the error repeats the request (%d bytes): %.600s", len(r.Body), r.Body)
			}
		})
	}
	if n := tool.Total.Load(); n != 0 {
		t.Fatalf("the tool ran %d times", n)
	}
}

// TestMCPArgumentsHaveTheRESTLimit: arguments of max_body_bytes are
// accepted over both doors; one byte more is refused over both (MCP: HTTP
// 413, -32602 payload_too_large), so a call accepted over MCP is accepted
// over REST.
func TestMCPArgumentsHaveTheRESTLimit(t *testing.T) {
	const limit = 2048
	tool := newTestTool("provision")
	h := newHarness(t, storeEmbedded, []tools.Tool{tool}, func(o *callpath.Options) { o.MaxBodyBytes = limit })
	args := func(size int) string {
		return `{"pad":"` + strings.Repeat("p", size-len(`{"pad":""}`)) + `"}`
	}
	atLimit, over := args(limit), args(limit+1)

	r := h.RawMCP(callBody("1", `{"name":"provision","arguments":`+atLimit+`,"_meta":{"io.github.toolgateway/sessionId":"lim","io.github.toolgateway/stepIndex":1}}`), "2025-11-25", nil)
	if a := decodeAnswer(t, r); a.Error != nil {
		t.Fatalf("arguments of max_body_bytes over MCP: %.300s", r.Body)
	}
	if rest := h.Do(callSpec{Tool: "provision", Session: "lim", Step: 1, Args: atLimit}); rest.Status != 200 || rest.Header.Get(wire.HeaderReplayed) != "true" {
		t.Fatalf("the same call over REST: %d %s", rest.Status, rest.Body)
	}

	r = h.RawMCP(callBody("2", `{"name":"provision","arguments":`+over+`,"_meta":{"io.github.toolgateway/sessionId":"lim","io.github.toolgateway/stepIndex":2}}`), "2025-11-25", nil)
	a := decodeAnswer(t, r)
	if r.Status != http.StatusRequestEntityTooLarge || a.Error == nil || a.Error.Code != wire.RPCInvalidParams ||
		!strings.Contains(string(a.Error.Data), wire.CodePayloadTooLarge) || string(a.ID) != "2" {
		t.Fatalf("arguments one byte over max_body_bytes over MCP: %d %s", r.Status, r.Body)
	}
	if rest := h.Do(callSpec{Tool: "provision", Session: "lim", Step: 2, Args: over}); rest.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("the same over REST: %d", rest.Status)
	}
	if n := tool.Total.Load(); n != 1 {
		t.Fatalf("the tool ran %d times, want 1", n)
	}
}

// TestMCPToolOfUpstreamNotListedYet: over MCP, a call to a tool of an MCP
// server whose tools are not listed yet is the retryable JSON-RPC error
// of upstream_unavailable (-32053), never "unknown tool", as REST answers
// 503 upstream_unavailable; nothing runs; once the server is listed the
// same call runs once. Covers both a stand-in of an allow-listed tool and
// a name matched by the server's prefix alone.
func TestMCPToolOfUpstreamNotListedYet(t *testing.T) {
	up, err := mcptest.New(mcptest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var down atomic.Bool
	down.Store(true)
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up.MCP() }, nil)
	upHTTP := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "not up yet", http.StatusServiceUnavailable)
			return
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		upHTTP.CloseClientConnections()
		upHTTP.Close()
	})
	var mgr *mcptool.Manager
	h := newHarness(t, storeEmbedded, nil, func(o *callpath.Options) {
		mgr, err = mcptool.NewManager(o.Tools, []mcptool.ServerConfig{
			{Name: "listed", URL: upHTTP.URL, Prefix: "a_", Tools: []string{mcptest.ToolCreate}},
			{Name: "prefixed", URL: upHTTP.URL, Prefix: "p_"},
		}, mcptool.Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
	})
	t.Cleanup(func() { _ = mgr.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := mgr.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cs := h.MCPSession(mcpClientOptions{})
	for step, name := range []string{"a_" + mcptest.ToolCreate, "p_" + mcptest.ToolCreate} {
		_, err := mcpCall(t, cs, name, `{"title":"early"}`, identityMeta("nl-"+name, step))
		data := wantRPCError(t, err, wire.RPCUpstreamUnavailable, wire.CodeUpstreamUnavailable)
		if data["retryable"] != true || data["retry_after_ms"] == nil {
			t.Fatalf("%s: upstream_unavailable over MCP must be retryable with retry_after_ms: %v", name, data)
		}
	}
	if n := len(up.All()); n != 0 {
		t.Fatalf("%d calls reached a server that was down", n)
	}

	down.Store(false)
	deadline := time.Now().Add(20 * time.Second)
	for len(mgr.NotReady()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("servers still not listed: %v", mgr.NotReady())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for step, name := range []string{"a_" + mcptest.ToolCreate, "p_" + mcptest.ToolCreate} {
		res, err := mcpCall(t, cs, name, `{"title":"early"}`, identityMeta("nl-"+name, step))
		wantExecuted(t, res, err, false)
	}
	if n := len(up.Executions(mcptest.ToolCreate)); n != 2 {
		t.Fatalf("%d executions once listed, want 2 (one per call)", n)
	}
}
