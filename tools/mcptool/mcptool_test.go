package mcptool_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/internal/mcptest"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/tools/mcptool"
	"github.com/toolgateway/toolgateway/wire"
)

func TestListsEveryPageWithPrefixDescriptionSchemaAndReadOnly(t *testing.T) {
	up := newHTTPUpstream(t, mcptest.Options{PageSize: 2})
	reg := tools.NewRegistry()
	m := startManager(t, reg, mcptool.ServerConfig{
		Name: "tickets", URL: up.http.URL, Prefix: "t_", ReadOnly: []string{"fail_tool"}, RecordIsError: true,
		Timeout: 3 * time.Second, ReplayTTL: time.Hour, LeaseExpiry: tools.LeaseExpiryUnknown,
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

func TestForwardsExactArgumentsAndIdentityMeta(t *testing.T) {
	up := newHTTPUpstream(t, mcptest.Options{})
	reg := tools.NewRegistry()
	startManager(t, reg, mcptool.ServerConfig{Name: "tickets", URL: up.http.URL, Prefix: "t_", RecordIsError: true}, mcptool.Options{})
	key := strings.Repeat("ab", 32)
	args := `{"title":"d\u00e9j\u00e0 vu","delay_ms":0}`
	resp, err := lookup(t, reg, "t_create_ticket").Tool.Call(context.Background(), &tools.Request{
		Arguments: json.RawMessage(args), Tenant: "acme", SessionID: "sess-1", StepIndex: 9007199254740991, HasStep: true,
		IdempotencyKey: key, ExecutionID: "01HZX3J5Q8W9VQ6M0N5E2R4T7Y", FencingToken: 7,
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != http.StatusOK || resp.ContentType != "application/json" {
		t.Fatalf("status %d, content type %q", resp.Status, resp.ContentType)
	}
	var result struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		StructuredContent map[string]any `json:"structuredContent"`
		IsError           bool           `json:"isError"`
	}
	if err := json.Unmarshal(resp.Body, &result); err != nil {
		t.Fatal(err)
	}
	if len(result.Content) != 1 || result.Content[0].Text != "created ticket 1: déjà vu" || result.StructuredContent["id"] != 1.0 {
		t.Fatalf("body = %s", resp.Body)
	}
	execs := up.srv.Executions(mcptest.ToolCreate)
	if len(execs) != 1 {
		t.Fatalf("%d executions, want 1", len(execs))
	}
	if string(execs[0].Arguments) != args {
		t.Fatalf("upstream got arguments %s, want %s", execs[0].Arguments, args)
	}
	meta := execs[0].Meta
	want := map[string]any{
		wire.MetaIdempotencyKey: tools.ScopedKey("acme", "t_create_ticket", key),
		wire.MetaTenant:         "acme",
		wire.MetaSessionID:      "sess-1",
		wire.MetaStepIndex:      9007199254740991.0,
		wire.MetaExecutionID:    "01HZX3J5Q8W9VQ6M0N5E2R4T7Y",
		wire.MetaFencingToken:   7.0,
	}
	for k, v := range want {
		if meta[k] != v {
			t.Errorf("_meta[%s] = %#v, want %#v", k, meta[k], v)
		}
	}
	if meta[wire.MetaIdempotencyKey] == key {
		t.Fatal("the client's key was forwarded unscoped")
	}
}

func TestOutcomeClasses(t *testing.T) {
	up := newHTTPUpstream(t, mcptest.Options{})
	reg := tools.NewRegistry()
	startManager(t, reg, mcptool.ServerConfig{Name: "rec", URL: up.http.URL, Prefix: "r_", RecordIsError: true, Timeout: 300 * time.Millisecond}, mcptool.Options{})
	// No keep-alive for this one: a request to the server once it is gone
	// is refused before anything is written. (On a kept-alive connection
	// the server closed, the request counts as written: an uncertain
	// outcome, see TestURLAnswerLostAfterTheServerActedIsUncertain.)
	noReuse := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	startManager(t, reg, mcptool.ServerConfig{Name: "norec", URL: up.http.URL, Prefix: "n_", RecordIsError: false}, mcptool.Options{HTTPClient: noReuse})
	req := func() *tools.Request {
		return &tools.Request{Arguments: json.RawMessage(`{"title":"slow","delay_ms":5000}`), Tenant: "acme"}
	}
	ctx := context.Background()

	resp, err := lookup(t, reg, "r_fail_tool").Tool.Call(ctx, req())
	if err != nil || resp.Status != 200 || !strings.Contains(string(resp.Body), `"isError":true`) {
		t.Fatalf("isError, record_is_error true: %v %+v", err, resp)
	}
	resp, err = lookup(t, reg, "n_fail_tool").Tool.Call(ctx, req())
	if err != nil || resp.Status != 500 || !strings.Contains(string(resp.Body), "title too long") {
		t.Fatalf("isError, record_is_error false: %v %+v, want status 500 with the result", err, resp)
	}
	_, err = lookup(t, reg, "r_fail_rpc").Tool.Call(ctx, req())
	if !errors.Is(err, tools.ErrUpstreamUnreachable) || !strings.Contains(err.Error(), "backend exploded") {
		t.Fatalf("JSON-RPC error: %v, want ErrUpstreamUnreachable", err)
	}
	_, err = lookup(t, reg, "r_create_ticket").Tool.Call(ctx, req())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow call past the timeout: %v, want a deadline error", err)
	}
	// The server goes away (its open streams first, or Close waits for them).
	up.http.CloseClientConnections()
	up.http.Close()
	_, err = lookup(t, reg, "n_create_ticket").Tool.Call(ctx, &tools.Request{Arguments: json.RawMessage(`{"title":"x"}`)})
	if !errors.Is(err, tools.ErrUpstreamUnreachable) {
		t.Fatalf("server gone: %v, want ErrUpstreamUnreachable", err)
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
		{mcptool.ServerConfig{Name: "a", URL: "http://x", LeaseExpiry: "never"}, "mcp_servers[0] (a).lease_expiry"},
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
