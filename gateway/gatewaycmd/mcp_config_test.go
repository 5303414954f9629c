package gatewaycmd

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/tools"
)

// TestMCPConfig checks the mcp section: its defaults, each field, and the
// 60 s cap of in_progress_wait.
func TestMCPConfig(t *testing.T) {
	cases := []struct {
		name, yaml string
		want       gateway.MCPOptions
	}{
		{"defaults", "", gateway.MCPOptions{}},
		{"disabled", "mcp:\n  enabled: false\n", gateway.MCPOptions{Disabled: true}},
		{"enabled", "mcp:\n  enabled: true\n", gateway.MCPOptions{}},
		{"wait", "mcp:\n  in_progress_wait: 25s\n", gateway.MCPOptions{InProgressWait: 25 * time.Second}},
		{"no wait", "mcp:\n  in_progress_wait: 0s\n", gateway.MCPOptions{InProgressWait: -1}},
		{"largest wait", "mcp:\n  in_progress_wait: 60s\n", gateway.MCPOptions{InProgressWait: 60 * time.Second}},
		{"allow unkeyed", "mcp:\n  allow_unkeyed: true\n", gateway.MCPOptions{AllowUnkeyed: true}},
		{"host call ids: one added", "mcp:\n  host_call_ids: [claudecode/toolUseId, agent-tool-call-request-id, myhost/callId]\n",
			gateway.MCPOptions{HostCallIDs: []string{"claudecode/toolUseId", "agent-tool-call-request-id", "myhost/callId"}}},
		{"host call ids: one removed", "mcp:\n  host_call_ids: [agent-tool-call-request-id]\n",
			gateway.MCPOptions{HostCallIDs: []string{"agent-tool-call-request-id"}}},
		{"host call ids: off", "mcp:\n  host_call_ids: []\n", gateway.MCPOptions{HostCallIDs: []string{}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := ParseConfig([]byte(c.yaml))
			if err != nil {
				t.Fatal(err)
			}
			cfg.withDefaults()
			opts, err := cfg.serverOptions(tools.Registered())
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(opts.MCP, c.want) {
				t.Fatalf("MCP options %+v, want %+v", opts.MCP, c.want)
			}
		})
	}
	for yaml, field := range map[string]string{
		"mcp:\n  in_progress_wait: 61s\n":             "mcp.in_progress_wait",
		"mcp:\n  in_progress_wait: soon\n":            "bad duration",
		"mcp:\n  enabeld: true\n":                     "enabeld",
		"mcp:\n  host_call_ids: [openai/session]\n":   "openai/session",
		"mcp:\n  host_call_ids: [vscode.requestId]\n": "vscode.requestId",
		"mcp:\n  host_call_ids: [progressToken]\n":    "progressToken",
		"mcp:\n  host_call_ids: [\"a:b\"]\n":          "mcp.host_call_ids",
	} {
		cfg, err := ParseConfig([]byte(yaml))
		if err == nil {
			cfg.withDefaults()
			_, err = cfg.serverOptions(tools.Registered())
		}
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%q: error %v, want one naming %s", yaml, err, field)
		}
	}
}
