package gatewaycmd

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgateway/toolgateway/internal/mcptest"
)

// TestMCPToolSettings: one tool of an MCP server gets its own decide
// rules and effect key (mcp_servers[].tool_settings), counted at the
// server: a denied call runs nothing, two calls with the same effect run
// once, the server's other tools keep the entry's settings.
func TestMCPToolSettings(t *testing.T) {
	up := newMCPUpstream(t)
	g := startGateway(t, "store:\n  path: "+filepath.Join(t.TempDir(), "gw.db")+`
mcp_servers:
  - name: tickets
    url: `+up.http.URL+`
    prefix: t_
    tool_settings:
      create_ticket:
        lease_expiry: unknown
        effect_key: "ticket:{/title}"
        decide:
          - when: "args.title.startsWith('urgent')"
            decision: deny
            reason: "urgent tickets are a person's call"
          - decision: allow
`)
	const tool = "t_" + mcptest.ToolCreate
	if r := keyedCall(t, g.addr, "s", 1, tool, `{"title":"urgent: reboot prod"}`); r.status != 403 || r.problemCode() != "call_denied" {
		t.Fatalf("denied by the tool's rule: %d %s, want 403 call_denied", r.status, r.body)
	}
	if r := keyedCall(t, g.addr, "s", 2, tool, `{"title":"printer"}`); r.status != 200 {
		t.Fatalf("allowed: %d %s", r.status, r.body)
	}
	// Another session and step, the same business action: its effect key.
	r := keyedCall(t, g.addr, "other", 7, tool, `{"title":"printer"}`)
	if r.status != 200 || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the same effect again: %d replayed=%q %s, want the first outcome replayed", r.status, r.header.Get("Idempotent-Replayed"), r.body)
	}
	if n := startedCount(up.srv); n != 1 {
		t.Fatalf("the server ran create_ticket %d times, want 1", n)
	}
	// get_ticket has no settings of its own: no rules deny it.
	if r := keyedCall(t, g.addr, "s", 3, "t_"+mcptest.ToolGet, `{"id":1}`); r.status != 200 {
		t.Fatalf("a tool without settings: %d %s", r.status, r.body)
	}
}

// TestMCPToolSettingsRefused: settings that cannot apply are refused at
// load, naming the field.
func TestMCPToolSettingsRefused(t *testing.T) {
	for name, tc := range map[string]struct{ entry, want string }{
		"not served":          {"    tools: [get_ticket]\n    tool_settings:\n      create_ticket: {lease_expiry: unknown}\n", "mcp_servers[0].tool_settings.create_ticket: the entry's tools list does not serve"},
		"bad lease_expiry":    {"    tool_settings:\n      create_ticket: {lease_expiry: sometimes}\n", "mcp_servers[0].tool_settings.create_ticket.lease_expiry"},
		"bad effect_key":      {"    tool_settings:\n      create_ticket: {effect_key: \"x:{title}\"}\n", "mcp_servers[0].tool_settings.create_ticket.effect_key"},
		"read-only effect":    {"    read_only: [get_ticket]\n    tool_settings:\n      get_ticket: {effect_key: \"g:{/id}\"}\n", "cannot hold an effect key"},
		"rule does not parse": {"    tool_settings:\n      create_ticket:\n        decide: [{when: \"args.title ==\", decision: deny}]\n", "mcp_servers[0].tool_settings.create_ticket.decide"},
		"unknown field":       {"    tool_settings:\n      create_ticket: {leese_expiry: unknown}\n", "leese_expiry"},
	} {
		t.Run(name, func(t *testing.T) {
			path := writeConfig(t, "store:\n  path: "+filepath.Join(t.TempDir(), "gw.db")+"\nmcp_servers:\n  - name: tickets\n    url: http://127.0.0.1:1/mcp\n    prefix: t_\n"+tc.entry)
			var out bytes.Buffer
			err := RunIO(context.Background(), []string{"gateway", "check", "-config", path}, envOf(nil), strings.NewReader(""), &out)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one naming %q", err, tc.want)
			}
		})
	}
}
