package mcptool_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/internal/mcptest"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/tools/mcptool"
)

func TestListsEveryPageWithPrefixDescriptionSchemaAndReadOnly(t *testing.T) {
	up := newHTTPUpstream(t, mcptest.Options{PageSize: 2})
	reg := tools.NewRegistry()
	m := startManager(t, reg, mcptool.ServerConfig{
		Name: "tickets", URL: up.http.URL, Prefix: "t_", ReadOnly: []string{"fail_tool"}, RecordIsError: true,
		Policy: tools.Policy{Timeout: 3 * time.Second, ReplayTTL: time.Hour, LeaseExpiry: tools.LeaseExpiryUnknown},
	}, mcptool.Options{})
	if nr := m.NotReady(); len(nr) != 0 {
		t.Fatalf("NotReady = %v after Start listed the server", nr)
	}
	var names []string
	for _, e := range reg.Entries() {
		names = append(names, e.Name())
	}
	// Eight tools over four pages of two.
	if got, want := strings.Join(names, ","), "t_add_tool,t_big_result,t_confirm_ticket,t_create_ticket,t_die,t_fail_rpc,t_fail_tool,t_get_ticket"; got != want {
		t.Fatalf("tools = %s, want %s", got, want)
	}
	create := lookup(t, reg, "t_create_ticket")
	if create.Spec.Description != "Create a ticket" || !create.Spec.ResultIsCallToolResult || create.Spec.ReadOnly {
		t.Fatalf("create spec = %+v", create.Spec)
	}
	if create.Spec.Policy != (tools.Policy{Timeout: 3 * time.Second, ReplayTTL: time.Hour, LeaseExpiry: tools.LeaseExpiryUnknown}) {
		t.Fatalf("policy = %+v", create.Spec.Policy)
	}
	// The upstream's schema is compiled by the gateway's validator.
	if v := create.Validate(map[string]any{"title": ""}); len(v) == 0 {
		t.Fatal("an empty title passed the upstream's schema (minLength 1)")
	}
	if v := create.Validate(map[string]any{"title": "x", "extra": true}); len(v) == 0 {
		t.Fatal("an extra member passed additionalProperties: false")
	}
	if v := create.Validate(map[string]any{"title": "x"}); v != nil {
		t.Fatalf("valid arguments refused: %v", v)
	}
	if !lookup(t, reg, "t_get_ticket").Spec.ReadOnly {
		t.Fatal("readOnlyHint tool is not read-only")
	}
	if !lookup(t, reg, "t_fail_tool").Spec.ReadOnly {
		t.Fatal("read_only tool is not read-only")
	}
}

func TestStandInsUntilListedThenListChanged(t *testing.T) {
	up := newHTTPUpstream(t, mcptest.Options{})
	up.down.Store(true)
	reg := tools.NewRegistry()
	m, err := mcptool.NewManager(reg, []mcptool.ServerConfig{
		{Name: "open", URL: up.http.URL, Prefix: "o_", RelistInterval: time.Hour},
		{Name: "allow", URL: up.http.URL, Prefix: "a_", Tools: []string{"create_ticket", "get_ticket"}, ReadOnly: []string{"get_ticket"}, RelistInterval: time.Hour},
	}, mcptool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	if got := strings.Join(m.NotReady(), ","); got != "allow,open" {
		t.Fatalf("NotReady = %q while the server is down", got)
	}
	if reg.Len() != 0 {
		t.Fatalf("discovery publishes %d stand-ins", reg.Len())
	}
	for _, name := range []string{"o_create_ticket", "o_whatever", "a_create_ticket", "a_get_ticket"} {
		e := lookup(t, reg, name)
		if !errors.Is(e.Available(), tools.ErrUpstreamUnavailable) {
			t.Fatalf("%s: Available = %v", name, e.Available())
		}
		if _, err := e.Tool.Call(context.Background(), &tools.Request{}); !errors.Is(err, tools.ErrUpstreamUnavailable) {
			t.Fatalf("%s: Call = %v, want ErrUpstreamUnavailable", name, err)
		}
	}
	if !lookup(t, reg, "a_get_ticket").Spec.ReadOnly {
		t.Fatal("configured read-only stand-in is not read-only")
	}
	if _, ok := reg.Lookup("a_die"); ok {
		t.Fatal("a name outside the allow-list is found")
	}

	up.down.Store(false) // the server comes up: retried with backoff
	waitFor(t, "both servers listed", func() bool { return len(m.NotReady()) == 0 })
	if e := lookup(t, reg, "a_create_ticket"); e.Available() != nil || e.Spec.Description != "Create a ticket" {
		t.Fatalf("after listing: %v %+v", e.Available(), e.Spec)
	}
	if _, ok := reg.Lookup("o_whatever"); ok {
		t.Fatal("the catch-all outlived the listing")
	}
	if _, ok := reg.Lookup("a_die"); ok {
		t.Fatal("allow-list ignored")
	}

	// notifications/tools/list_changed: a tool appears, then goes, while serving.
	up.srv.AddTool("new_tool")
	waitFor(t, "o_new_tool listed after list_changed", func() bool { _, ok := reg.Lookup("o_new_tool"); return ok })
	if _, ok := reg.Lookup("a_new_tool"); ok {
		t.Fatal("allow-list ignored on re-list")
	}
	up.srv.RemoveTool("new_tool")
	waitFor(t, "o_new_tool removed after list_changed", func() bool { _, ok := reg.Lookup("o_new_tool"); return !ok })
}

func TestPeriodicRelist(t *testing.T) {
	// A stateless server cannot reach the client with list_changed: only
	// the relist timer notices the new tool.
	up := newHTTPUpstreamWith(t, mcptest.Options{}, &mcp.StreamableHTTPOptions{Stateless: true})
	reg := tools.NewRegistry()
	startManager(t, reg, mcptool.ServerConfig{Name: "p", URL: up.http.URL, Prefix: "p_", RelistInterval: 200 * time.Millisecond}, mcptool.Options{})
	up.srv.AddTool("later")
	waitFor(t, "p_later listed by the periodic re-list", func() bool { _, ok := reg.Lookup("p_later"); return ok })
}

func TestNameRuleAndClashErrorsNameBothSides(t *testing.T) {
	up := newHTTPUpstream(t, mcptest.Options{ExtraTools: []string{"BadName"}})
	reg := tools.NewRegistry()
	if err := reg.Add(plainTool("t_create_ticket")); err != nil {
		t.Fatal(err)
	}
	m, err := mcptool.NewManager(reg, []mcptool.ServerConfig{{Name: "tickets", URL: up.http.URL, Prefix: "t_"}}, mcptool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = m.Start(ctx)
	if err == nil {
		t.Fatal("Start accepted a clash and an invalid name")
	}
	for _, want := range []string{
		`MCP server "tickets", tool "create_ticket" clashes with tool "t_create_ticket"`,
		`MCP server "tickets", tool "BadName": tool "t_BadName": invalid name`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if _, ok := reg.Lookup("t_get_ticket"); !ok {
		t.Fatal("the server's other tools were not installed")
	}
	// An allow-listed name that clashes is refused at once, by NewManager.
	_, err = mcptool.NewManager(reg, []mcptool.ServerConfig{{Name: "other", URL: up.http.URL, Prefix: "t_", Tools: []string{"get_ticket"}}}, mcptool.Options{})
	if err == nil || !strings.Contains(err.Error(), `MCP server "other" (not listed yet), tool "t_get_ticket" clashes with MCP server "tickets", tool "get_ticket"`) {
		t.Fatalf("allow-list clash: %v", err)
	}
}

// plainTool is an in-process tool with a fixed name.
type plainTool string

func (p plainTool) Spec() tools.Spec { return tools.Spec{Name: string(p)} }

func (p plainTool) Call(context.Context, *tools.Request) (*tools.Response, error) {
	return tools.JSON(200, map[string]bool{"ok": true})
}
