package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/tools/mcptool"
)

// mcpStandIns are the MCP servers verify puts in the place of the
// configured ones, for -mcp-list: go-sdk servers with the tools each
// configured server listed (the same names, input schemas, readOnlyHint)
// whose executions the tools' stand-ins count, reached through the
// gateway's own MCP upstream code (a Manager built from the config's
// mcp_servers with only the address changed, Program.ConnectMCP), as
// start-up would.
type mcpStandIns struct {
	servers []*httptest.Server
	manager *mcptool.Manager
}

// startMCPStandIns serves a stand-in for every MCP server whose tools
// listed in p.Options.Tools, connects the gateway's MCP upstream code to
// them (p.ConnectMCP), which registers their tools in registry, and records
// each tool's stand-in in standIns. Nil when no server listed a tool.
func startMCPStandIns(ctx context.Context, p Program, registry *tools.Registry, standIns map[string]*standIn) (*mcpStandIns, error) {
	listed := map[string][]tools.Spec{}
	for _, e := range p.Options.Tools.Entries() {
		if t, ok := e.Tool.(*mcptool.Tool); ok {
			listed[t.Server()] = append(listed[t.Server()], e.Spec)
		}
	}
	if len(listed) == 0 {
		return nil, nil
	}
	m := &mcpStandIns{}
	urls := map[string]string{}
	for _, e := range p.MCPServers {
		specs := listed[e.Name]
		if len(specs) == 0 {
			continue
		}
		srv, err := serveMCPStandIn(e, specs, standIns)
		if err != nil {
			m.Close()
			return nil, err
		}
		m.servers = append(m.servers, srv)
		urls[e.Name] = srv.URL
	}
	manager, err := p.ConnectMCP(ctx, registry, urls)
	m.manager = manager
	if err == nil && len(manager.NotReady()) > 0 {
		err = fmt.Errorf("the stand-ins of MCP servers %s did not list their tools", strings.Join(manager.NotReady(), ", "))
	}
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("verify: MCP stand-ins: %w", err)
	}
	return m, nil
}

// serveMCPStandIn serves one stand-in MCP server over Streamable HTTP with
// the tools of entry e that it listed (specs, named with e's prefix).
func serveMCPStandIn(e MCPServer, specs []tools.Spec, standIns map[string]*standIn) (*httptest.Server, error) {
	server := mcp.NewServer(&mcp.Implementation{Name: "gateway-verify-stand-in-" + e.Name, Version: "1"}, nil)
	byUpstream := map[string]*standIn{}
	for _, spec := range specs {
		s := &standIn{spec: spec}
		standIns[spec.Name] = s
		name := strings.TrimPrefix(spec.Name, e.Prefix)
		byUpstream[name] = s
		schema := json.RawMessage(spec.InputSchema)
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		tool := &mcp.Tool{Name: name, Description: spec.Description, InputSchema: schema,
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: spec.ReadOnly}}
		if err := addStandInTool(server, tool, countingHandler(s)); err != nil {
			return nil, fmt.Errorf("MCP server %s, tool %s: %w", e.Name, name, err)
		}
	}
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true})
	return httptest.NewServer(uncertainAnswers(handler, byUpstream)), nil
}

// addStandInTool adds tool to server; go-sdk panics on a schema it does
// not serve (not of type object), which is an error here.
func addStandInTool(server *mcp.Server, tool *mcp.Tool, h mcp.ToolHandler) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("a stand-in cannot serve it: %v", r)
		}
	}()
	server.AddTool(tool, h)
	return nil
}

// countingHandler runs a tools/call on stand-in s: it counts and answers.
func countingHandler(s *standIn) mcp.ToolHandler {
	return func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		n := s.runs.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(`{"ok":true,"n":%d}`, n)}}}, nil
	}
}

// uncertainAnswers lets next run a tools/call of a stand-in told to be
// uncertain, then drops the connection without an answer: the gateway
// has sent the call and hears nothing back, as when a server dies.
func uncertainAnswers(next http.Handler, byUpstream map[string]*standIn) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			Method string
			Params struct{ Name string }
		}
		_ = json.Unmarshal(body, &msg)
		if s := byUpstream[msg.Params.Name]; msg.Method == "tools/call" && s != nil && s.uncertain.Load() {
			next.ServeHTTP(httptest.NewRecorder(), r)
			panic(http.ErrAbortHandler)
		}
		next.ServeHTTP(w, r)
	})
}

// Close disconnects the Manager and stops the stand-in servers.
func (m *mcpStandIns) Close() {
	if m == nil {
		return
	}
	if m.manager != nil {
		_ = m.manager.Close()
	}
	for _, s := range m.servers {
		s.CloseClientConnections()
		s.Close()
	}
}
