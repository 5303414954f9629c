package mcptool_test

import (
	"strings"
	"testing"

	"github.com/toolgateway/toolgateway/internal/mcptest"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/tools/mcptool"
)

func TestHeadersWithEnvironmentExpansion(t *testing.T) {
	up := newHTTPUpstream(t, mcptest.Options{})
	reg := tools.NewRegistry()
	env := map[string]string{"TICKETS_TOKEN": "s3cret"}
	startManager(t, reg, mcptool.ServerConfig{Name: "h", URL: up.http.URL, Headers: map[string]string{"Authorization": "Bearer ${TICKETS_TOKEN}"}},
		mcptool.Options{Getenv: func(k string) string { return env[k] }})
	if got := up.lastAuth(); got != "Bearer s3cret" {
		t.Fatalf("Authorization = %q", got)
	}
	_, err := mcptool.NewManager(tools.NewRegistry(), []mcptool.ServerConfig{{Name: "h", URL: up.http.URL, Headers: map[string]string{"Authorization": "Bearer ${MISSING}"}}},
		mcptool.Options{Getenv: func(string) string { return "" }})
	if err == nil || !strings.Contains(err.Error(), "mcp_servers[0] (h).headers.Authorization: ${MISSING} is not set") {
		t.Fatalf("unset variable: %v", err)
	}
}

func TestConfigErrorsNameTheField(t *testing.T) {
	cases := []struct {
		cfg  mcptool.ServerConfig
		want string
	}{
		{mcptool.ServerConfig{Name: "Bad", URL: "http://x"}, "mcp_servers[0] (Bad).name"},
		{mcptool.ServerConfig{Name: "a"}, "mcp_servers[0] (a).url or command"},
		{mcptool.ServerConfig{Name: "a", URL: "http://x", Command: []string{"x"}}, "mcp_servers[0] (a).url and command"},
		{mcptool.ServerConfig{Name: "a", URL: "ftp://x"}, "mcp_servers[0] (a).url"},
		{mcptool.ServerConfig{Name: "a", URL: "http://x", Prefix: "T_"}, "mcp_servers[0] (a).prefix"},
		{mcptool.ServerConfig{Name: "a", URL: "http://x", Tools: []string{"Create"}}, "mcp_servers[0] (a).tools[0]"},
		{mcptool.ServerConfig{Name: "a", URL: "http://x", Policy: tools.Policy{LeaseExpiry: "never"}}, "mcp_servers[0] (a).lease_expiry"},
		{mcptool.ServerConfig{Name: "a", URL: "http://x", Headers: map[string]string{"Mcp-Session-Id": "x"}}, "mcp_servers[0] (a).headers.Mcp-Session-Id"},
		{mcptool.ServerConfig{Name: "a", Command: []string{"x"}, Headers: map[string]string{"A": "b"}}, "mcp_servers[0] (a).headers"},
	}
	for _, c := range cases {
		_, err := mcptool.NewManager(tools.NewRegistry(), []mcptool.ServerConfig{c.cfg}, mcptool.Options{})
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one starting %q", c.cfg, err, c.want)
		}
	}
	_, err := mcptool.NewManager(tools.NewRegistry(), []mcptool.ServerConfig{{Name: "a", URL: "http://x"}, {Name: "a", URL: "http://y"}}, mcptool.Options{})
	if err == nil || !strings.Contains(err.Error(), "mcp_servers[1] (a).name") {
		t.Errorf("duplicate name: %v", err)
	}
}
