package mcptool_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/internal/mcptest"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/tools/mcptool"
)

// TestInputRequiredIsPassedBackNotFulfilled: an upstream of protocol
// 2026-07-28 (go-sdk serves it statelessly) answers confirm_ticket with an
// input_required result. For a client that can answer it, the tool returns
// that result as a Response marked InputRequired (not an outcome); for one
// that cannot (REST), an error. The continuation (inputResponses and
// requestState) reaches the server, which then acts once.
func TestInputRequiredIsPassedBackNotFulfilled(t *testing.T) {
	t.Run("url", func(t *testing.T) {
		up := newHTTPUpstreamWith(t, mcptest.Options{}, &mcp.StreamableHTTPOptions{Stateless: true})
		reg := tools.NewRegistry()
		startManager(t, reg, mcptool.ServerConfig{Name: "r", URL: up.http.URL}, mcptool.Options{})
		inputRequiredRoundTrip(t, reg, func(event string) int { return len(mcptest.Filter(up.srv.All(), mcptest.ToolConfirm, event)) })
	})
	t.Run("stdio", func(t *testing.T) {
		logPath := filepath.Join(t.TempDir(), "execs.jsonl")
		reg := tools.NewRegistry()
		startManager(t, reg, mcptool.ServerConfig{Name: "local", Command: []string{stdioBinary(t), "-log", logPath}}, mcptool.Options{})
		inputRequiredRoundTrip(t, reg, func(event string) int { return len(mcptest.Filter(readLog(t, logPath), mcptest.ToolConfirm, event)) })
	})
}

// inputRequiredRoundTrip runs confirm_ticket's two rounds through reg;
// events counts the server's events of confirm_ticket.
func inputRequiredRoundTrip(t *testing.T, reg *tools.Registry, events func(event string) int) {
	t.Helper()
	confirm := lookup(t, reg, mcptest.ToolConfirm).Tool
	args := json.RawMessage(`{"title":"x"}`)

	resp, err := confirm.Call(context.Background(), &tools.Request{Arguments: args, AcceptsInputRequests: true})
	if err != nil || !resp.InputRequired || resp.Status != 200 {
		t.Fatalf("first round: %v %+v", err, resp)
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(resp.Body, &res); err != nil || !res.NeedsInput() || res.RequestState != mcptest.ConfirmState || res.InputRequests["confirm"] == nil {
		t.Fatalf("first round body %s: %v", resp.Body, err)
	}

	_, err = confirm.Call(context.Background(), &tools.Request{Arguments: args})
	if err == nil || errors.Is(err, tools.ErrOutcomeUncertain) || !strings.Contains(err.Error(), "client input") {
		t.Fatalf("a client that cannot answer: %v", err)
	}

	answers, _ := json.Marshal(mcp.InputResponseMap{"confirm": &mcp.ElicitResult{Action: "accept"}})
	resp, err = confirm.Call(context.Background(), &tools.Request{Arguments: args, AcceptsInputRequests: true,
		Continuation: &tools.Continuation{InputResponses: answers, RequestState: mcptest.ConfirmState}})
	if err != nil || resp.InputRequired || resp.Status != 200 || !strings.Contains(string(resp.Body), "created ticket 1: x") {
		t.Fatalf("continuation: %v %+v", err, resp)
	}
	if events("asked") != 2 || events("done") != 1 {
		t.Fatalf("asked %d, done %d: want 2 and 1", events("asked"), events("done"))
	}
}
