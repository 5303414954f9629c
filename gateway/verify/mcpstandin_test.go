package verify

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/internal/mcptest"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/tools/mcptool"
)

// ticketsServer is the config's one MCP server: tickets, its tools named
// with the prefix t_.
var ticketsServer = mcptool.ServerConfig{Name: "tickets", Prefix: "t_", RecordIsError: true,
	Policy: tools.Policy{LeaseExpiry: tools.LeaseExpiryUnknown}}

// connectTickets builds and starts the MCP upstream code for ticketsServer
// at url, its tools registered in registry, as start-up would.
func connectTickets(ctx context.Context, registry *tools.Registry, url string) (*mcptool.Manager, error) {
	server := ticketsServer
	server.URL = url
	m, err := mcptool.NewManager(registry, []mcptool.ServerConfig{server}, mcptool.Options{})
	if err != nil {
		return nil, err
	}
	startCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return m, m.Start(startCtx)
}

// The stand-in MCP server of -mcp-list has the listed tools, is reached
// through the gateway's MCP upstream code (an mcptool.Tool in the
// registry), counts each tools/call at the stand-in, and, told to be
// uncertain, runs the call and drops the connection: the gateway sees an
// uncertain outcome. The real server runs nothing.
func TestVerifyMCPStandInServerCountsAndDropsUncertainCalls(t *testing.T) {
	real, err := mcptest.New(mcptest.Options{PageSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return real.MCP() }, nil))
	defer up.Close()
	listed := tools.NewRegistry() // what -mcp-list found: the real server's tools
	lister, err := connectTickets(t.Context(), listed, up.URL)
	if lister != nil {
		defer lister.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	p := Program{
		Options:    callpath.Options{Tools: listed},
		MCPServers: []MCPServer{{Name: ticketsServer.Name, Prefix: ticketsServer.Prefix}},
		MCPListed:  true,
		ConnectMCP: func(ctx context.Context, registry *tools.Registry, urls map[string]string) (*mcptool.Manager, error) {
			return connectTickets(ctx, registry, urls[ticketsServer.Name])
		},
	}
	registry := tools.NewRegistry()
	standIns := map[string]*standIn{}
	m, err := startMCPStandIns(t.Context(), p, registry, standIns)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	entry, ok := registry.Lookup("t_create_ticket")
	if !ok {
		t.Fatalf("t_create_ticket is not in the stand-ins' registry")
	}
	if _, ok := entry.Tool.(*mcptool.Tool); !ok {
		t.Fatalf("t_create_ticket is a %T, want the gateway's MCP upstream tool", entry.Tool)
	}
	call := func() (*tools.Response, error) {
		return entry.Tool.Call(context.Background(), &tools.Request{Arguments: []byte(`{"title":"verify"}`), ExecutionID: "01JVERIFY"})
	}
	resp, err := call()
	if err != nil || resp.Status != 200 || !strings.Contains(string(resp.Body), `{\"ok\":true,\"n\":1}`) {
		t.Fatalf("a call through the stand-in MCP server: %v %+v, want 200 with the stand-in's answer", err, resp)
	}
	standIns["t_create_ticket"].uncertain.Store(true)
	if _, err := call(); !errors.Is(err, tools.ErrOutcomeUncertain) {
		t.Fatalf("an uncertain stand-in: %v, want ErrOutcomeUncertain", err)
	}
	if n := standIns["t_create_ticket"].runs.Load(); n != 2 {
		t.Fatalf("the stand-in ran %d times, want 2 (the uncertain call ran too)", n)
	}
	if calls := real.All(); len(calls) != 0 {
		t.Fatalf("the real MCP server ran %d calls, want none", len(calls))
	}
}
