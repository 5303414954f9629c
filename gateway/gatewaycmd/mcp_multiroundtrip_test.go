package gatewaycmd

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/internal/mcptest"
	"github.com/toolgateway/toolgateway/wire"
)

// mcpClientWith connects a go-sdk client with opts to the gateway's /mcp.
func mcpClientWith(t *testing.T, addr string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	transport := &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp", HTTPClient: &http.Client{Timeout: 60 * time.Second}, MaxRetries: -1}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "gatewaycmd-mrtr-test", Version: "1"}, opts).Connect(ctx, transport, nil)
	if err != nil {
		t.Fatalf("connect the MCP client to %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// TestMCPUpstreamMultiRoundTrip: an MCP upstream tool asks for the user's
// confirmation (an input_required result, SEP-2322) before its counted side
// effect. Driven by go-sdk's client (which fulfils input requests itself
// and sends the continuation: same arguments and _meta, inputResponses,
// requestState, a new request id), the gateway hands the input request to
// the client without recording it, forwards the continuation, and records
// the final result once: one side effect, one confirmation. The call made
// again replays it, and so does the continuation sent again by hand (same
// bytes but replayed: true); the upstream is not asked again. Over REST,
// which cannot answer input requests, the call fails unrecorded.
func TestMCPUpstreamMultiRoundTrip(t *testing.T) {
	// go-sdk serves protocol 2026-07-28 (where input requests are passed
	// to the client) statelessly.
	up := newMCPUpstreamWith(t, &mcp.StreamableHTTPOptions{Stateless: true})
	g := startGateway(t, "listen: 127.0.0.1:0\nstore:\n  path: "+filepath.Join(t.TempDir(), "gw.db")+`
mcp_servers:
  - name: tickets
    url: `+up.http.URL+`
`)
	var confirmations atomic.Int32
	cs := mcpClientWith(t, g.addr, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			confirmations.Add(1)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"ok": true}}, nil
		},
	})
	args := `{"title":"confirmed once"}`
	events := func(event string) int { return len(mcptest.Filter(up.srv.All(), mcptest.ToolConfirm, event)) }

	first, err := mcpCallTool(t, cs, mcptest.ToolConfirm, args, "mrtr", 1)
	if err != nil {
		t.Fatalf("multi round-trip call: %v", err)
	}
	if first.IsError || first.Meta[wire.MetaReplayed] != false || first.Meta[wire.MetaExecutionID] == nil {
		t.Fatalf("final result %+v _meta %v: %s", first, first.Meta, first.Content[0].(*mcp.TextContent).Text)
	}
	if text := first.Content[0].(*mcp.TextContent).Text; text != "created ticket 1: confirmed once" {
		t.Fatalf("final result text %q", text)
	}
	if events("asked") != 1 || events("done") != 1 || confirmations.Load() != 1 {
		t.Fatalf("asked %d, done %d, confirmations %d: want 1 each", events("asked"), events("done"), confirmations.Load())
	}

	// The same call again: the recorded final result, nothing asked or run.
	again, err := mcpCallTool(t, cs, mcptest.ToolConfirm, args, "mrtr", 1)
	if err != nil {
		t.Fatal(err)
	}
	// The continuation again, sent by hand by a client that fulfils
	// nothing itself.
	manual := mcpClientWith(t, g.addr, &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cont, err := manual.CallTool(ctx, &mcp.CallToolParams{
		Name:           mcptest.ToolConfirm,
		Arguments:      json.RawMessage(args),
		Meta:           mcp.Meta{wire.MetaSessionID: "mrtr", wire.MetaStepIndex: 1},
		InputResponses: mcp.InputResponseMap{"confirm": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"ok": true}}},
		RequestState:   mcptest.ConfirmState,
	})
	if err != nil {
		t.Fatal(err)
	}
	firstJSON, _ := json.Marshal(first)
	for name, replay := range map[string]*mcp.CallToolResult{"the call again": again, "the continuation again": cont} {
		if replay.Meta[wire.MetaReplayed] != true || replay.Meta[wire.MetaExecutionID] != first.Meta[wire.MetaExecutionID] {
			t.Fatalf("%s: _meta %v, want replayed true and executionId %v", name, replay.Meta, first.Meta[wire.MetaExecutionID])
		}
		replayJSON, _ := json.Marshal(replay)
		var a, b map[string]any
		_ = json.Unmarshal(firstJSON, &a)
		_ = json.Unmarshal(replayJSON, &b)
		a["_meta"].(map[string]any)[wire.MetaReplayed] = true
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%s: %s differs from the first answer %s beyond replayed", name, replayJSON, firstJSON)
		}
	}
	if events("asked") != 1 || events("done") != 1 || confirmations.Load() != 1 {
		t.Fatalf("after the replays: asked %d, done %d, confirmations %d: want 1 each", events("asked"), events("done"), confirmations.Load())
	}

	// The first round by hand: the input request itself, not recorded
	// (no execution id), and the upstream's request state passed on.
	ask, err := manual.CallTool(ctx, &mcp.CallToolParams{
		Name: mcptest.ToolConfirm, Arguments: json.RawMessage(args),
		Meta: mcp.Meta{wire.MetaSessionID: "mrtr", wire.MetaStepIndex: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !ask.NeedsInput() || ask.RequestState != mcptest.ConfirmState || ask.InputRequests["confirm"] == nil || ask.Meta[wire.MetaExecutionID] != nil {
		t.Fatalf("first round: needs input %v, state %q, requests %v, _meta %v", ask.NeedsInput(), ask.RequestState, ask.InputRequests, ask.Meta)
	}
	if events("asked") != 2 || events("done") != 1 {
		t.Fatalf("asked %d, done %d after a first round by hand", events("asked"), events("done"))
	}

	// Both first rounds are counted as such, not as executions.
	if m := get(t, "http://"+g.addr+"/metrics"); !strings.Contains(string(m.body), `gateway_requests_total{api="mcp",outcome="input_required",tool="confirm_ticket"} 2`) {
		t.Fatalf("metrics lack the two input_required answers:\n%s", m.body)
	}

	// REST cannot answer input requests: a failure, not recorded.
	rest := keyedCall(t, g.addr, "mrtr-rest", 1, mcptest.ToolConfirm, args)
	if rest.status < 500 || events("done") != 1 {
		t.Fatalf("over REST: %d %s, done %d", rest.status, rest.body, events("done"))
	}
	if again := keyedCall(t, g.addr, "mrtr-rest", 1, mcptest.ToolConfirm, args); again.header.Get("Idempotent-Replayed") == "true" || events("asked") != 4 {
		t.Fatalf("over REST again: %d replayed %q, asked %d: the failure must not be recorded", again.status, again.header.Get("Idempotent-Replayed"), events("asked"))
	}
}
