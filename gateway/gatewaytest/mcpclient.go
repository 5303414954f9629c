package gatewaytest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/wire"
)

// The MCP endpoint is tested with go-sdk's own client over real HTTP
// against the real router, never with a hand-made imitation of the
// protocol; raw POSTs (RawMCP) are for what no real client sends.

// MCPProtocolVersions are the protocol versions the contract requires.
var MCPProtocolVersions = []string{"2026-07-28", "2025-11-25"}

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

// MCPClientOptions configure go-sdk's client on /mcp.
type MCPClientOptions struct {
	// Version is the protocol version to ask for ("" is go-sdk's latest).
	Version string
	Token   string
	// Header is sent with every POST.
	Header http.Header
}

// MCPConnect connects go-sdk's client to the harness's /mcp.
func (h *Harness) MCPConnect(o MCPClientOptions) (*mcp.ClientSession, error) {
	var rt http.RoundTripper = h.Client.Transport
	if o.Token != "" {
		rt = bearer{token: o.Token, base: rt}
	}
	if o.Header != nil {
		rt = headerSetter{header: o.Header, base: rt}
	}
	transport := &mcp.StreamableClientTransport{
		Endpoint:   h.Srv.URL + "/mcp",
		HTTPClient: &http.Client{Transport: rt, Timeout: 30 * time.Second},
		MaxRetries: -1,
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "gateway-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var opts *mcp.ClientSessionOptions
	if o.Version != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: o.Version}
	}
	return client.Connect(ctx, transport, opts)
}

// MCPSession is MCPConnect that fails the test when it cannot connect,
// closed when the test ends.
func (h *Harness) MCPSession(o MCPClientOptions) *mcp.ClientSession {
	h.T.Helper()
	cs, err := h.MCPConnect(o)
	if err != nil {
		h.T.Fatalf("connect MCP client: %v", err)
	}
	h.T.Cleanup(func() { _ = cs.Close() })
	return cs
}

// IdentityMeta is the _meta of a call's identity.
func IdentityMeta(session string, step any) mcp.Meta {
	return mcp.Meta{wire.MetaSessionID: session, wire.MetaStepIndex: step}
}

// MCPCall calls a tool with raw arguments ("" sends none).
func MCPCall(t testing.TB, cs *mcp.ClientSession, tool, args string, meta mcp.Meta) (*mcp.CallToolResult, error) {
	t.Helper()
	params := &mcp.CallToolParams{Name: tool, Meta: meta}
	if args != "" {
		params.Arguments = json.RawMessage(args)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return cs.CallTool(ctx, params)
}

// WantRPCError asserts a JSON-RPC error with code and (unless dataCode is
// "") data.code and data.retryable, and returns data.
func WantRPCError(t testing.TB, err error, code int64, dataCode string) map[string]any {
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

// RawMCP posts body to /mcp as a client that speaks the given protocol
// version ("" sends no version header), with header added.
func (h *Harness) RawMCP(body, version string, header http.Header) Response {
	h.T.Helper()
	req, err := http.NewRequest(http.MethodPost, h.Srv.URL+"/mcp", bytes.NewBufferString(body))
	if err != nil {
		h.T.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if version != "" {
		req.Header.Set("Mcp-Protocol-Version", version)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	r, err := h.roundTrip(req)
	if err != nil {
		h.T.Fatalf("POST /mcp: %v", err)
	}
	return r
}

// RPCErrorOf decodes a JSON-RPC error response.
func RPCErrorOf(t testing.TB, r Response) (code int64, data map[string]any) {
	t.Helper()
	var msg struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *struct {
			Code int64           `json:"code"`
			Data json.RawMessage `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.Body, &msg); err != nil || msg.JSONRPC != "2.0" || msg.Error == nil || msg.ID == nil {
		t.Fatalf("want a JSON-RPC error response, got %d %q: %s", r.Status, r.Header.Get("Content-Type"), r.Body)
	}
	if len(msg.Error.Data) > 0 {
		_ = json.Unmarshal(msg.Error.Data, &data)
	}
	return msg.Error.Code, data
}
