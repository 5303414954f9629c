package gatewaycmd

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/mcpserver"
	"github.com/toolgateway/toolgateway/tools"
)

// TestMCPConfig checks the mcp section: its defaults, each field, and the
// 60 s cap of in_progress_wait.
func TestMCPConfig(t *testing.T) {
	cases := []struct {
		name, yaml string
		want       mcpserver.Options
	}{
		{"defaults", "", mcpserver.Options{}},
		{"disabled", "mcp:\n  enabled: false\n", mcpserver.Options{Disabled: true}},
		{"enabled", "mcp:\n  enabled: true\n", mcpserver.Options{}},
		{"wait", "mcp:\n  in_progress_wait: 25s\n", mcpserver.Options{InProgressWait: 25 * time.Second}},
		{"no wait", "mcp:\n  in_progress_wait: 0s\n", mcpserver.Options{InProgressWait: -1}},
		{"largest wait", "mcp:\n  in_progress_wait: 60s\n", mcpserver.Options{InProgressWait: 60 * time.Second}},
		{"allow unkeyed", "mcp:\n  allow_unkeyed: true\n", mcpserver.Options{AllowUnkeyed: true}},
		{"host call ids: one added", "mcp:\n  host_call_ids: [claudecode/toolUseId, agent-tool-call-request-id, myhost/callId]\n",
			mcpserver.Options{HostCallIDs: []string{"claudecode/toolUseId", "agent-tool-call-request-id", "myhost/callId"}}},
		{"host call ids: one removed", "mcp:\n  host_call_ids: [agent-tool-call-request-id]\n",
			mcpserver.Options{HostCallIDs: []string{"agent-tool-call-request-id"}}},
		{"host call ids: off", "mcp:\n  host_call_ids: []\n", mcpserver.Options{HostCallIDs: []string{}}},
		{"fast path", "mcp:\n  fast_path: true\n", mcpserver.Options{}},
		{"fast path off", "mcp:\n  fast_path: false\n", mcpserver.Options{FastPathOff: true}},
		{"identityless refuse", "mcp:\n  identityless: refuse\n  dedupe_window: 1h\n",
			mcpserver.Options{Identityless: mcpserver.Identityless{Mode: mcpserver.IdentitylessRefuse, Window: time.Hour}}},
		{"identityless by default with persons", "auth:\n  oidc:\n    issuer: https://login.example.com/\n    audience: https://gw.example.com/mcp\n    tenant: acme\n",
			mcpserver.Options{Identityless: mcpserver.Identityless{Mode: mcpserver.IdentitylessFingerprint}}},
		{"a tool's own window", "tools:\n  - name: refund\n    dedupe_window: 10m\n    http:\n      url: http://127.0.0.1:1/refund\n",
			mcpserver.Options{ToolIdentityless: map[string]mcpserver.Identityless{"refund": {Window: 10 * time.Minute}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := ParseConfig([]byte(c.yaml))
			if err != nil {
				t.Fatal(err)
			}
			cfg.withDefaults()
			if _, err := cfg.serverOptions(tools.Registered()); err != nil {
				t.Fatal(err)
			}
			opts, err := cfg.mcpOptions()
			if err != nil {
				t.Fatal(err)
			}
			if c.want.Identityless.Mode == "" {
				// Without auth.oidc no caller is a person: refuse.
				c.want.Identityless.Mode = mcpserver.IdentitylessRefuse
			}
			if !reflect.DeepEqual(opts, c.want) {
				t.Fatalf("MCP options %+v, want %+v", opts, c.want)
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
