package agentclient_test

import (
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/idempotency/boltstore"
	"github.com/toolgateway/toolgateway/gateway/mcpserver"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/tools/builtin"
)

// gatewayURL is the root URL of the gateway the examples call. In a program
// it is your gateway's address, such as "http://127.0.0.1:8080"; in this
// test binary TestMain serves a real gateway in-process: the embedded store
// in a temporary directory and the bundled tools (provision-infra, echo,
// lookup-resource), no auth.
var gatewayURL string

// bundled are the tools that gateway serves; tests read their execution
// counts.
var bundled *builtin.Set

func TestMain(m *testing.M) {
	os.Exit(runWithGateway(m))
}

func runWithGateway(m *testing.M) int {
	dir, err := os.MkdirTemp("", "agentclient-examples-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	store, err := boltstore.Open(filepath.Join(dir, "gateway.db"), boltstore.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer store.Close()
	bundled = builtin.NewSet()
	registry, err := tools.NewRegistryOf(bundled.Tools()...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// /mcp is the MCP adapter's, mounted as the program mounts it (the
	// examples include an MCP client's call).
	gw, err := gateway.NewServer(callpath.Options{Store: store, Tools: registry,
		Mounts: []callpath.Mount{mcpserver.Mount(mcpserver.Options{})}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	server := httptest.NewServer(gw)
	defer server.Close()
	gatewayURL = server.URL
	return m.Run()
}
