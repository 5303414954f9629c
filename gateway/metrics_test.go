package gateway_test

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"regexp"
	"strings"
	"testing"

	"github.com/toolgateway/toolgateway/internal/testutil"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// TestMCPMetricsAndLog: MCP calls are counted and logged like REST calls,
// with api="mcp"; REST calls keep api="rest".
func TestMCPMetricsAndLog(t *testing.T) {
	logs := &testutil.LockedBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, nil))
	tool := newTestTool("provision")
	h := newHarness(t, storeEmbedded, []tools.Tool{tool}, withLogger(logger))
	cs := h.mcpSession(mcpClientOptions{})
	for range 2 {
		res, err := mcpCall(t, cs, "provision", `{}`, identityMeta("metrics", 0))
		if err != nil || res.IsError {
			t.Fatalf("call: %v", err)
		}
	}
	_, err := mcpCall(t, cs, "provision", `{}`, nil)
	wantRPCError(t, err, wire.RPCInvalidParams, wire.CodeAgentSessionMissing)
	_, err = mcpCall(t, cs, "nope", `{}`, identityMeta("metrics", 1))
	wantRPCError(t, err, wire.RPCInvalidParams, wire.CodeToolNotFound)
	if r := h.do(callSpec{tool: "provision", session: "metrics", step: 0, args: `{}`}); r.status != 200 {
		t.Fatalf("REST: %d", r.status)
	}

	for _, c := range []struct {
		api, tool, outcome string
		want               float64
	}{
		{"mcp", "provision", "executed", 1},
		{"mcp", "provision", "replayed", 1},
		{"mcp", "provision", "invalid", 1},
		{"mcp", "unknown", "not_found", 1},
		{"rest", "provision", "replayed", 1},
		{"rest", "provision", "executed", 0},
	} {
		if got := h.counterAPI(c.api, c.tool, c.outcome); got != c.want {
			t.Errorf("gateway_requests_total{api=%s,tool=%s,outcome=%s} = %v, want %v", c.api, c.tool, c.outcome, got, c.want)
		}
	}

	calls := map[string]int{}
	lines := bufio.NewScanner(strings.NewReader(logs.String()))
	for lines.Scan() {
		var l map[string]any
		if err := json.Unmarshal(lines.Bytes(), &l); err != nil {
			t.Fatalf("log line is not JSON: %s", lines.Text())
		}
		if l["msg"] != "request" {
			continue
		}
		if l["route"] == "/mcp" && l["api"] != "mcp" {
			t.Errorf("an /mcp request logged without api=mcp: %s", lines.Text())
		}
		if l["outcome"] != "other" {
			calls[l["api"].(string)+" "+l["outcome"].(string)]++
		}
	}
	for key, want := range map[string]int{"mcp executed": 1, "mcp replayed": 1, "mcp invalid": 1, "mcp not_found": 1, "rest replayed": 1} {
		if calls[key] != want {
			t.Errorf("log lines %q: %d, want %d (all: %v)", key, calls[key], want, calls)
		}
	}
}

// TestMetricsSeries scrapes /metrics over HTTP and checks the two
// required series with their labels, and that an unknown tool is "unknown".
func TestMetricsSeries(t *testing.T) {
	h := newHarness(t, storeEmbedded, []tools.Tool{newTestTool("echo")})
	c := callSpec{tool: "echo", session: "m", step: 1, args: `{}`}
	h.do(c)
	h.do(c)
	h.do(callSpec{tool: "Evil-Tool-Name", session: "m", step: 2, args: `{}`})
	h.do(callSpec{tool: "echo", args: `{"x":`})
	text := string(h.get("/metrics", "").body)
	for _, want := range []string{
		`gateway_requests_total{api="rest",outcome="executed",tool="echo"} 1`,
		`gateway_requests_total{api="rest",outcome="replayed",tool="echo"} 1`,
		`gateway_requests_total{api="rest",outcome="invalid",tool="echo"} 1`,
		`gateway_request_duration_seconds_count{api="rest",outcome="executed",tool="echo"} 1`,
		`gateway_request_duration_seconds_count{api="rest",outcome="replayed",tool="echo"} 1`,
		`# TYPE gateway_request_duration_seconds histogram`,
		`# TYPE gateway_requests_total counter`,
	} {
		if !strings.Contains(text, want) {
			t.Fatalf("/metrics lacks %q", want)
		}
	}
	if !regexp.MustCompile(`gateway_requests_total\{api="rest",outcome="[a-z_]+",tool="unknown"\} 1`).MatchString(text) {
		t.Fatal(`an unknown tool is not counted under tool="unknown"`)
	}
	if strings.Contains(text, "Evil") {
		t.Fatal("raw user input reached a metric label")
	}
}
