package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// The MCP endpoint is tested with go-sdk's own client over real HTTP
// against the real router (the harness), never with a hand-made imitation
// of the protocol; raw POSTs are used only for what no real client sends.

// mcpProtocolVersions are the protocol versions the contract requires.
var mcpProtocolVersions = []string{"2026-07-28", "2025-11-25"}

// bearer adds a bearer token to every request of an MCP client.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// headerSetter adds fixed headers to every request of an MCP client (the
// identity fallback of the contract).
type headerSetter struct {
	header http.Header
	base   http.RoundTripper
}

func (s headerSetter) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range s.header {
		r.Header[k] = v
	}
	return s.base.RoundTrip(r)
}

type mcpClientOptions struct {
	version string
	token   string
	header  http.Header
}

// mcpConnect connects go-sdk's client to the harness's /mcp.
func (h *harness) mcpConnect(o mcpClientOptions) (*mcp.ClientSession, error) {
	var rt http.RoundTripper = h.client.Transport
	if o.token != "" {
		rt = bearer{token: o.token, base: rt}
	}
	if o.header != nil {
		rt = headerSetter{header: o.header, base: rt}
	}
	transport := &mcp.StreamableClientTransport{
		Endpoint:   h.srv.URL + "/mcp",
		HTTPClient: &http.Client{Transport: rt, Timeout: 30 * time.Second},
		MaxRetries: -1,
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "gateway-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var opts *mcp.ClientSessionOptions
	if o.version != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: o.version}
	}
	return client.Connect(ctx, transport, opts)
}

func (h *harness) mcpSession(o mcpClientOptions) *mcp.ClientSession {
	h.t.Helper()
	cs, err := h.mcpConnect(o)
	if err != nil {
		h.t.Fatalf("connect MCP client: %v", err)
	}
	h.t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// identityMeta is the _meta of a call's identity.
func identityMeta(session string, step any) mcp.Meta {
	return mcp.Meta{wire.MetaSessionID: session, wire.MetaStepIndex: step}
}

// mcpCall calls a tool with raw arguments ("" sends none).
func mcpCall(t testing.TB, cs *mcp.ClientSession, tool, args string, meta mcp.Meta) (*mcp.CallToolResult, error) {
	t.Helper()
	params := &mcp.CallToolParams{Name: tool, Meta: meta}
	if args != "" {
		params.Arguments = json.RawMessage(args)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return cs.CallTool(ctx, params)
}

// wantRPCError asserts a JSON-RPC error with code and data.code.
func wantRPCError(t testing.TB, err error, code int64, dataCode string) map[string]any {
	t.Helper()
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) {
		t.Fatalf("want JSON-RPC error %d %s, got %v", code, dataCode, err)
	}
	if rpcErr.Code != code {
		t.Fatalf("JSON-RPC code = %d, want %d (%s): %s %s", rpcErr.Code, code, dataCode, rpcErr.Message, rpcErr.Data)
	}
	var data map[string]any
	if dataCode != "" {
		if err := json.Unmarshal(rpcErr.Data, &data); err != nil {
			t.Fatalf("error data: %v: %s", err, rpcErr.Data)
		}
		if data["code"] != dataCode {
			t.Fatalf("data.code = %v, want %s: %s", data["code"], dataCode, rpcErr.Data)
		}
		if _, ok := data["retryable"].(bool); !ok {
			t.Fatalf("data.retryable missing: %s", rpcErr.Data)
		}
	}
	return data
}

// rawMCP posts body to /mcp as a client that speaks the given protocol
// version ("" sends no version header).
func (h *harness) rawMCP(body, version string, header http.Header) response {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.srv.URL+"/mcp", bytes.NewBufferString(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if version != "" {
		req.Header.Set("Mcp-Protocol-Version", version)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := h.client.Do(req)
	if err != nil {
		h.t.Fatalf("POST /mcp: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// rpcErrorOf decodes a JSON-RPC error response.
func rpcErrorOf(t testing.TB, r response) (code int64, data map[string]any) {
	t.Helper()
	var msg struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *struct {
			Code int64           `json:"code"`
			Data json.RawMessage `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.body, &msg); err != nil || msg.JSONRPC != "2.0" || msg.Error == nil || msg.ID == nil {
		t.Fatalf("want a JSON-RPC error response, got %d %q: %s", r.status, r.header.Get("Content-Type"), r.body)
	}
	if len(msg.Error.Data) > 0 {
		_ = json.Unmarshal(msg.Error.Data, &data)
	}
	return msg.Error.Code, data
}

func TestMCPToolsList(t *testing.T) {
	provision := newTestTool("provision")
	provision.schema = `{"type":"object","properties":{"size":{"type":"integer","minimum":1}},"required":["size"]}`
	lookup := newTestTool("lookup")
	lookup.readOnly = true
	bare := newTestTool("bare") // no schema: {"type":"object"}
	untyped := newTestTool("untyped")
	untyped.schema = `{"properties":{"q":{"type":"string"}}}`
	h := newHarness(t, storeEmbedded, []tools.Tool{provision, lookup, bare, untyped})

	for _, version := range mcpProtocolVersions {
		t.Run(version, func(t *testing.T) {
			cs := h.mcpSession(mcpClientOptions{version: version})
			if got := cs.InitializeResult().ProtocolVersion; got != version {
				t.Fatalf("negotiated protocol version %q, want %q", got, version)
			}
			ctx := context.Background()
			res, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatalf("tools/list: %v", err)
			}
			byName := map[string]*mcp.Tool{}
			for _, tool := range res.Tools {
				byName[tool.Name] = tool
			}
			if len(byName) != 4 {
				t.Fatalf("tools/list has %d tools, want 4: %v", len(byName), byName)
			}
			wantSchema := map[string]string{
				"provision": provision.schema,
				"lookup":    `{"type":"object"}`,
				"bare":      `{"type":"object"}`,
				"untyped":   `{"type":"object","allOf":[` + untyped.schema + `]}`,
			}
			for name, want := range wantSchema {
				tool := byName[name]
				if tool == nil {
					t.Fatalf("tool %s missing", name)
				}
				if tool.Description != "test tool "+name {
					t.Errorf("%s: description %q", name, tool.Description)
				}
				got, _ := json.Marshal(tool.InputSchema)
				if !jsonEqual(t, got, []byte(want)) {
					t.Errorf("%s: inputSchema %s, want %s", name, got, want)
				}
				readOnly := tool.Annotations != nil && tool.Annotations.ReadOnlyHint
				if readOnly != (name == "lookup") {
					t.Errorf("%s: readOnlyHint = %v", name, readOnly)
				}
			}
		})
	}
	if n := provision.total.Load() + lookup.total.Load(); n != 0 {
		t.Fatalf("listing ran %d tools", n)
	}
}

// jsonEqual compares two JSON texts as values.
func jsonEqual(t testing.TB, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("json %s: %v", a, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("json %s: %v", b, err)
	}
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return bytes.Equal(ja, jb)
}

func TestMCPAuth(t *testing.T) {
	tool := newTestTool("provision")
	h := newHarness(t, storeEmbedded, []tools.Tool{tool}, withTenants(map[string]string{"acme": "acme-token"}))

	for _, token := range []string{"", "wrong-token"} {
		if _, err := h.mcpConnect(mcpClientOptions{token: token}); err == nil {
			t.Fatalf("token %q: connected without a valid token", token)
		}
		r := h.rawMCP(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"provision","arguments":{},"_meta":{"io.github.toolgateway/sessionId":"s","io.github.toolgateway/stepIndex":1}}}`,
			"2025-11-25", http.Header{"Authorization": {"Bearer " + token}})
		wantProblem(t, r, http.StatusUnauthorized, "unauthorized")
	}
	cs := h.mcpSession(mcpClientOptions{token: "acme-token"})
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatalf("tools/list with a valid token: %v", err)
	}
	if n := tool.total.Load(); n != 0 {
		t.Fatalf("the tool ran %d times", n)
	}
}

func TestMCPMethodsOtherThanPost(t *testing.T) {
	h := newHarness(t, storeEmbedded, []tools.Tool{newTestTool("provision")})
	for _, method := range []string{http.MethodGet, http.MethodDelete, http.MethodPut} {
		r := h.send(method, "/mcp", "")
		wantProblem(t, r, http.StatusMethodNotAllowed, "method_not_allowed")
		if allow := r.header.Get("Allow"); allow != "POST" {
			t.Fatalf("%s /mcp: Allow %q", method, allow)
		}
	}
	// Stateless: no session id, whatever the client sends.
	r := h.rawMCP(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, "", nil)
	if r.status != 200 || r.header.Get("Mcp-Session-Id") != "" {
		t.Fatalf("initialize: %d, Mcp-Session-Id %q: %s", r.status, r.header.Get("Mcp-Session-Id"), r.body)
	}
}

func TestMCPDisabled(t *testing.T) {
	h := newHarness(t, storeEmbedded, []tools.Tool{newTestTool("provision")}, withMCP(func(o *mcpOptions) { o.Disabled = true }))
	if r := h.rawMCP(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "2025-11-25", nil); r.status != http.StatusNotFound {
		t.Fatalf("POST /mcp with mcp disabled: %d %s", r.status, r.body)
	}
}

type mcpOptions = gateway.MCPOptions

// withMCP changes the MCP options of a harness.
func withMCP(change func(*mcpOptions)) harnessOption {
	return func(o *gateway.Options) { change(&o.MCP) }
}
