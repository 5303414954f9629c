package mcpserver_test

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/gatewaytest"
	"github.com/toolgateway/toolgateway/gateway/mcpserver"
	"github.com/toolgateway/toolgateway/tools"
)

// The endpoint's tests run on gatewaytest's harness: a gateway served over
// real HTTP on loopback with POST /mcp mounted as the program mounts it,
// real stores, counting tools and go-sdk's own client. The names below
// are gatewaytest's, short.

type (
	harness          = gatewaytest.Harness
	harnessOption    = gatewaytest.Option
	callSpec         = gatewaytest.Call
	response         = gatewaytest.Response
	mcpClientOptions = gatewaytest.MCPClientOptions
	storeKind        = gatewaytest.StoreKind
)

const storeEmbedded = gatewaytest.Embedded

var (
	allStores           = gatewaytest.AllStores
	mcpProtocolVersions = gatewaytest.MCPProtocolVersions
	newTestTool         = gatewaytest.NewTool
	identityMeta        = gatewaytest.IdentityMeta
	mcpCall             = gatewaytest.MCPCall
	wantRPCError        = gatewaytest.WantRPCError
	rpcErrorOf          = gatewaytest.RPCErrorOf
	wantProblem         = gatewaytest.WantProblem
	wantExecuted        = gatewaytest.WantExecuted
	wantErrorMeta       = gatewaytest.WantErrorMeta
	resultJSON          = gatewaytest.ResultJSON
	resultText          = gatewaytest.ResultText
	jsonEqual           = gatewaytest.JSONEqual
	mustMarshal         = gatewaytest.MustMarshal
	derivedKey          = gatewaytest.DerivedKey
	eventually          = gatewaytest.Eventually
	withTenants         = gatewaytest.WithTenants
	withPolicy          = gatewaytest.WithPolicy
	forEachStore        = gatewaytest.ForEachStore
)

// newHarness serves toolset with POST /mcp mounted with the default
// options (withMCP changes them).
func newHarness(t testing.TB, kind gatewaytest.StoreKind, toolset []tools.Tool, opts ...harnessOption) *harness {
	t.Helper()
	return gatewaytest.New(t, kind, toolset, append([]harnessOption{withMCP(mcpserver.Options{})}, opts...)...)
}

// withMCP mounts POST /mcp with o.
func withMCP(o mcpserver.Options) harnessOption {
	return func(g *callpath.Options) { g.Mounts = []callpath.Mount{mcpserver.Mount(o)} }
}

// resultMeta returns a member of the result's _meta.
func resultMeta(res *mcp.CallToolResult, name string) any {
	return res.Meta[name]
}
