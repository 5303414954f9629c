package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/gateway/mcpserver"
	"github.com/toolgateway/toolgateway/tools"
)

func TestMCPToolsList(t *testing.T) {
	provision := newTestTool("provision")
	provision.Schema = `{"type":"object","properties":{"size":{"type":"integer","minimum":1}},"required":["size"]}`
	lookup := newTestTool("lookup")
	lookup.ReadOnly = true
	bare := newTestTool("bare") // no schema: {"type":"object"}
	untyped := newTestTool("untyped")
	untyped.Schema = `{"properties":{"q":{"type":"string"}}}`
	h := newHarness(t, storeEmbedded, []tools.Tool{provision, lookup, bare, untyped})

	for _, version := range mcpProtocolVersions {
		t.Run(version, func(t *testing.T) {
			cs := h.MCPSession(mcpClientOptions{Version: version})
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
				"provision": provision.Schema,
				"lookup":    `{"type":"object"}`,
				"bare":      `{"type":"object"}`,
				"untyped":   `{"type":"object","allOf":[` + untyped.Schema + `]}`,
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
	if n := provision.Total.Load() + lookup.Total.Load(); n != 0 {
		t.Fatalf("listing ran %d tools", n)
	}
}

func TestMCPAuth(t *testing.T) {
	tool := newTestTool("provision")
	h := newHarness(t, storeEmbedded, []tools.Tool{tool}, withTenants(map[string]string{"acme": "acme-token"}))

	for _, token := range []string{"", "wrong-token"} {
		if _, err := h.MCPConnect(mcpClientOptions{Token: token}); err == nil {
			t.Fatalf("token %q: connected without a valid token", token)
		}
		r := h.RawMCP(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"provision","arguments":{},"_meta":{"io.github.toolgateway/sessionId":"s","io.github.toolgateway/stepIndex":1}}}`,
			"2025-11-25", http.Header{"Authorization": {"Bearer " + token}})
		wantProblem(t, r, http.StatusUnauthorized, "unauthorized")
	}
	cs := h.MCPSession(mcpClientOptions{Token: "acme-token"})
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatalf("tools/list with a valid token: %v", err)
	}
	if n := tool.Total.Load(); n != 0 {
		t.Fatalf("the tool ran %d times", n)
	}
}

func TestMCPMethodsOtherThanPost(t *testing.T) {
	h := newHarness(t, storeEmbedded, []tools.Tool{newTestTool("provision")})
	for _, method := range []string{http.MethodGet, http.MethodDelete, http.MethodPut} {
		r := h.Send(method, "/mcp", "")
		wantProblem(t, r, http.StatusMethodNotAllowed, "method_not_allowed")
		if allow := r.Header.Get("Allow"); allow != "POST" {
			t.Fatalf("%s /mcp: Allow %q", method, allow)
		}
	}
	// Stateless: no session id, whatever the client sends.
	r := h.RawMCP(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, "", nil)
	if r.Status != 200 || r.Header.Get("Mcp-Session-Id") != "" {
		t.Fatalf("initialize: %d, Mcp-Session-Id %q: %s", r.Status, r.Header.Get("Mcp-Session-Id"), r.Body)
	}
}

func TestMCPDisabled(t *testing.T) {
	h := newHarness(t, storeEmbedded, []tools.Tool{newTestTool("provision")}, withMCP(mcpserver.Options{Disabled: true}))
	if r := h.RawMCP(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "2025-11-25", nil); r.Status != http.StatusNotFound {
		t.Fatalf("POST /mcp with mcp disabled: %d %s", r.Status, r.Body)
	}
}
