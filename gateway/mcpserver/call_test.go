package mcpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/keyderive"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// resultJSON is a tool result as the client received it, as a JSON value.
func resultJSON(t testing.TB, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	return mustJSON(t, b)
}

// resultMeta returns a member of the result's _meta.
func resultMeta(res *mcp.CallToolResult, name string) any {
	return res.Meta[name]
}

// resultText is the text of a result's one content item.
func resultText(t testing.TB, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("result has %d content items: %+v", len(res.Content), res)
	}
	text, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content is %T, want text", res.Content[0])
	}
	return text.Text
}

// wantExecuted asserts a result of an executed (or replayed) call and
// returns its execution id.
func wantExecuted(t testing.TB, res *mcp.CallToolResult, err error, replayed bool) string {
	t.Helper()
	if err != nil {
		t.Fatalf("tools/call: %v", err)
	}
	if got := resultMeta(res, wire.MetaReplayed); got != replayed {
		t.Fatalf("_meta replayed = %v, want %v: %+v", got, replayed, resultJSON(t, res))
	}
	id, _ := resultMeta(res, wire.MetaExecutionID).(string)
	if len(id) != 26 {
		t.Fatalf("_meta executionId %q is not a ULID", id)
	}
	return id
}

func TestMCPCallAndReplay(t *testing.T) {
	tool := newTestTool("provision")
	tool.schema = `{"type":"object","properties":{"size":{"type":"integer","minimum":1}},"required":["size"]}`
	h := newHarness(t, storeEmbedded, []tools.Tool{tool})
	for i, version := range mcpProtocolVersions {
		t.Run(version, func(t *testing.T) {
			cs := h.mcpSession(mcpClientOptions{version: version})
			session := "mcp-replay-" + version
			args := `{"size": 2, "name": "db"}`

			first, err := mcpCall(t, cs, "provision", args, identityMeta(session, 4))
			id := wantExecuted(t, first, err, false)
			if first.IsError {
				t.Fatalf("isError on a 200: %+v", resultJSON(t, first))
			}
			body := resultText(t, first)
			want := fmt.Sprintf(`{"execution_id":%q,"n":%d,"ok":true}`, id, i+1)
			if body != want {
				t.Fatalf("text %s, want the tool's body %s", body, want)
			}
			if !jsonEqual(t, mustMarshal(t, first.StructuredContent), []byte(body)) {
				t.Fatalf("structuredContent %v, want the body", first.StructuredContent)
			}

			// A retry, from a new client as after a crash, with the step
			// index as a string this time: the same call.
			cs2 := h.mcpSession(mcpClientOptions{version: version})
			again, err := mcpCall(t, cs2, "provision", `{"name":"db","size":2.0}`, identityMeta(session, "4"))
			if wantExecuted(t, again, err, true) != id {
				t.Fatalf("replay has another execution id")
			}
			a, b := resultJSON(t, first), resultJSON(t, again)
			delete(a["_meta"].(map[string]any), wire.MetaReplayed)
			delete(b["_meta"].(map[string]any), wire.MetaReplayed)
			if !jsonEqual(t, mustMarshal(t, a), mustMarshal(t, b)) {
				t.Fatalf("replay differs from the first answer:\n%v\n%v", a, b)
			}
		})
	}
	if n := tool.total.Load(); n != int64(len(mcpProtocolVersions)) {
		t.Fatalf("tool ran %d times, want once per protocol version", n)
	}
}

func mustMarshal(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestMCPStepConflict(t *testing.T) {
	provision := newTestTool("provision")
	teardown := newTestTool("teardown")
	h := newHarness(t, storeEmbedded, []tools.Tool{provision, teardown})
	cs := h.mcpSession(mcpClientOptions{})
	res, err := mcpCall(t, cs, "provision", `{"size":1}`, identityMeta("conflict", 3))
	id := wantExecuted(t, res, err, false)

	for _, c := range []struct{ tool, args string }{{"provision", `{"size":2}`}, {"teardown", `{"size":1}`}} {
		_, err := mcpCall(t, cs, c.tool, c.args, identityMeta("conflict", 3))
		data := wantRPCError(t, err, wire.RPCInvalidParams, wire.CodeStepConflict)
		if data["tool"] != "provision" || data["execution_id"] != id || data["retryable"] != false {
			t.Fatalf("step_conflict data %v, want tool provision and execution_id %s", data, id)
		}
	}
	if provision.total.Load() != 1 || teardown.total.Load() != 0 {
		t.Fatalf("runs: provision %d, teardown %d", provision.total.Load(), teardown.total.Load())
	}
}

// TestMCPConcurrentDuplicates fires 20 identical calls at once, each from
// its own client: the tool runs once, and every client gets its outcome.
func TestMCPConcurrentDuplicates(t *testing.T) {
	for _, kind := range allStores {
		t.Run(string(kind), func(t *testing.T) {
			tool := newTestTool("provision")
			release := make(chan struct{})
			tool.behave = func(ctx context.Context, req *tools.Request) (*tools.Response, error) {
				<-release
				return tools.JSON(201, map[string]any{"id": "vm-1", "execution_id": req.ExecutionID})
			}
			h := newHarness(t, kind, []tools.Tool{tool})
			const n = 20
			sessions := make([]*mcp.ClientSession, n)
			for i := range sessions {
				sessions[i] = h.mcpSession(mcpClientOptions{version: mcpProtocolVersions[i%2]})
			}
			var wg sync.WaitGroup
			results := make([]*mcp.CallToolResult, n)
			errs := make([]error, n)
			for i := range n {
				wg.Go(func() {
					results[i], errs[i] = mcpCall(t, sessions[i], "provision", `{"size":1}`, identityMeta("dup", 0))
				})
			}
			eventually(t, 10*time.Second, "the first call to start", func() bool { return tool.total.Load() == 1 })
			time.Sleep(100 * time.Millisecond) // let the duplicates reach the store
			close(release)
			wg.Wait()

			executed, ids := 0, map[string]bool{}
			for i := range n {
				if errs[i] != nil {
					t.Fatalf("call %d: %v", i, errs[i])
				}
				if results[i].Meta[wire.MetaReplayed] == false {
					executed++
				}
				ids[results[i].Meta[wire.MetaExecutionID].(string)] = true
			}
			if n := tool.total.Load(); n != 1 || executed != 1 || len(ids) != 1 {
				t.Fatalf("tool ran %d times, %d results say executed, %d execution ids; want 1, 1, 1", n, executed, len(ids))
			}
		})
	}
}

// TestMCPAndRESTShareRecords: the same call over REST and MCP is one
// record, whichever comes first, and one step guard.
func TestMCPAndRESTShareRecords(t *testing.T) {
	tool := newTestTool("provision")
	h := newHarness(t, storeRedis, []tools.Tool{tool})
	cs := h.mcpSession(mcpClientOptions{})
	args := `{"size":3,"region":"eu"}`

	// REST first, then MCP.
	rest := h.do(callSpec{tool: "provision", session: "shared", step: 1, args: args})
	if rest.status != 200 || rest.header.Get("Idempotent-Replayed") != "false" {
		t.Fatalf("REST call: %d %v", rest.status, rest.header)
	}
	res, err := mcpCall(t, cs, "provision", `{"region":"eu","size":3}`, identityMeta("shared", 1))
	if id := wantExecuted(t, res, err, true); id != rest.header.Get("Tool-Execution-Id") {
		t.Fatalf("MCP replay has execution id %s, REST %s", id, rest.header.Get("Tool-Execution-Id"))
	}
	if resultText(t, res) != string(rest.body) {
		t.Fatalf("MCP text %q differs from the REST body %q", resultText(t, res), rest.body)
	}

	// MCP first, then REST.
	res, err = mcpCall(t, cs, "provision", args, identityMeta("shared", 2))
	id := wantExecuted(t, res, err, false)
	rest = h.do(callSpec{tool: "provision", session: "shared", step: 2, args: args})
	if rest.status != 200 || rest.header.Get("Idempotent-Replayed") != "true" || rest.header.Get("Tool-Execution-Id") != id {
		t.Fatalf("REST after MCP: %d %v", rest.status, rest.header)
	}
	if string(rest.body) != resultText(t, res) {
		t.Fatalf("REST body %q differs from the MCP text %q", rest.body, resultText(t, res))
	}

	// One step guard: step 2 over REST with other arguments, step 1 over
	// MCP with other arguments.
	wantProblem(t, h.do(callSpec{tool: "provision", session: "shared", step: 2, args: `{"size":4}`}), 422, wire.CodeStepConflict)
	_, err = mcpCall(t, cs, "provision", `{"size":4}`, identityMeta("shared", 1))
	wantRPCError(t, err, wire.RPCInvalidParams, wire.CodeStepConflict)

	// The key sent over MCP is the REST key.
	key := derivedKey(t, "shared", 2, "provision", args)
	meta := identityMeta("shared", 2)
	meta[wire.MetaIdempotencyKey] = key
	res, err = mcpCall(t, cs, "provision", args, meta)
	wantExecuted(t, res, err, true)
	if n := tool.total.Load(); n != 2 {
		t.Fatalf("tool ran %d times, want 2", n)
	}
}

// TestMCPIdentityFromHeaders: a client that cannot send _meta may send the
// REST headers; both ways given, they must agree.
func TestMCPIdentityFromHeaders(t *testing.T) {
	tool := newTestTool("provision")
	h := newHarness(t, storeEmbedded, []tools.Tool{tool})
	byHeader := h.mcpSession(mcpClientOptions{header: http.Header{"Agent-Session-Id": {"hdr"}, "Agent-Step-Index": {"9"}}})
	res, err := mcpCall(t, byHeader, "provision", `{}`, nil)
	id := wantExecuted(t, res, err, false)

	byMeta := h.mcpSession(mcpClientOptions{})
	res, err = mcpCall(t, byMeta, "provision", `{}`, identityMeta("hdr", 9))
	if wantExecuted(t, res, err, true) != id {
		t.Fatal("a call by _meta did not replay the same call by headers")
	}
	_, err = mcpCall(t, byHeader, "provision", `{}`, identityMeta("hdr", 10))
	wantRPCError(t, err, wire.RPCInvalidParams, wire.CodeIdempotencyMetadataConflict)
	_, err = mcpCall(t, byHeader, "provision", `{}`, identityMeta("other", 9))
	wantRPCError(t, err, wire.RPCInvalidParams, wire.CodeIdempotencyMetadataConflict)
	if n := tool.total.Load(); n != 1 {
		t.Fatalf("tool ran %d times, want 1", n)
	}
}

// TestMCPBadInput: each bad tools/call gets the contract's error, and
// nothing is stored or run: afterwards the same step is still free.
func TestMCPBadInput(t *testing.T) {
	tool := newTestTool("provision")
	tool.schema = `{"type":"object","properties":{"size":{"type":"integer"}}}`
	h := newHarness(t, storeEmbedded, []tools.Tool{tool})
	cs := h.mcpSession(mcpClientOptions{})
	good := identityMeta("bad", 1)
	withMeta := func(change func(mcp.Meta)) mcp.Meta {
		m := identityMeta("bad", 1)
		change(m)
		return m
	}
	cases := []struct {
		name, tool, args string
		meta             mcp.Meta
		code             string
	}{
		{"unknown tool", "provisio", `{}`, good, wire.CodeToolNotFound},
		{"arguments an array", "provision", `[1,2]`, good, wire.CodeInvalidArguments},
		{"arguments a string", "provision", `"size=1"`, good, wire.CodeInvalidArguments},
		{"arguments null", "provision", `null`, good, wire.CodeInvalidArguments},
		{"duplicate names", "provision", `{"size":1,"size":2}`, good, wire.CodeInvalidJSON},
		{"nested duplicate names", "provision", `{"a":{"b":1,"b":1}}`, good, wire.CodeInvalidJSON},
		{"lone surrogate", "provision", `{"s":"\ud800"}`, good, wire.CodeInvalidJSON},
		{"no identity", "provision", `{}`, nil, wire.CodeAgentSessionMissing},
		{"no step", "provision", `{}`, mcp.Meta{wire.MetaSessionID: "bad"}, wire.CodeAgentStepMissing},
		{"no session", "provision", `{}`, mcp.Meta{wire.MetaStepIndex: 1}, wire.CodeAgentSessionMissing},
		{"step -1", "provision", `{}`, identityMeta("bad", -1), wire.CodeAgentStepMalformed},
		{"step 1.5", "provision", `{}`, identityMeta("bad", 1.5), wire.CodeAgentStepMalformed},
		{`step "07"`, "provision", `{}`, identityMeta("bad", "07"), wire.CodeAgentStepMalformed},
		{"step 2^53", "provision", `{}`, identityMeta("bad", int64(1)<<53), wire.CodeAgentStepMalformed},
		{`step "9007199254740992"`, "provision", `{}`, identityMeta("bad", "9007199254740992"), wire.CodeAgentStepMalformed},
		{"session with ':'", "provision", `{}`, identityMeta("bad:1", 1), wire.CodeAgentSessionMalformed},
		{"session not a string", "provision", `{}`, withMeta(func(m mcp.Meta) { m[wire.MetaSessionID] = 12 }), wire.CodeAgentSessionMalformed},
		{"key malformed", "provision", `{}`, withMeta(func(m mcp.Meta) { m[wire.MetaIdempotencyKey] = "abc" }), wire.CodeIdempotencyKeyMalformed},
		{"key of other arguments", "provision", `{}`, withMeta(func(m mcp.Meta) {
			m[wire.MetaIdempotencyKey] = derivedKey(t, "bad", 1, "provision", `{"size":1}`)
		}), wire.CodeIdempotencyKeyMismatch},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := mcpCall(t, cs, c.tool, c.args, c.meta)
			data := wantRPCError(t, err, wire.RPCInvalidParams, c.code)
			if data["retryable"] != false {
				t.Fatalf("retryable %v", data["retryable"])
			}
			if c.code == wire.CodeInvalidArguments {
				if errs, _ := data["errors"].([]any); len(errs) == 0 {
					t.Fatalf("invalid_arguments without errors: %v", data)
				}
			}
		})
	}
	// go-sdk's client cannot send a number beyond the double range (it
	// fails building its own Mcp-* headers), so this one goes raw.
	r := h.rawMCP(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"provision","arguments":{"size":1e400},"_meta":{"io.github.toolgateway/sessionId":"bad","io.github.toolgateway/stepIndex":1}}}`, "2025-11-25", nil)
	if code, data := rpcErrorOf(t, r); code != wire.RPCInvalidParams || data["code"] != wire.CodeInvalidJSON {
		t.Fatalf("1e400: %d %s", r.status, r.body)
	}
	if n := tool.total.Load(); n != 0 {
		t.Fatalf("tool ran %d times on bad input", n)
	}
	res, err := mcpCall(t, cs, "provision", `{"size":1}`, good)
	wantExecuted(t, res, err, false)
}

// TestMCPSchemaViolation: arguments that break the schema are a tool
// result the model can act on; nothing is stored, so the corrected call
// on the same step runs.
func TestMCPSchemaViolation(t *testing.T) {
	tool := newTestTool("provision")
	tool.schema = `{"type":"object","properties":{"size":{"type":"integer","minimum":1}},"required":["size"]}`
	h := newHarness(t, storeEmbedded, []tools.Tool{tool})
	cs := h.mcpSession(mcpClientOptions{})
	res, err := mcpCall(t, cs, "provision", `{"size":0}`, identityMeta("schema", 0))
	if err != nil {
		t.Fatalf("schema violation as a protocol error: %v", err)
	}
	if !res.IsError || !strings.Contains(resultText(t, res), "/size") {
		t.Fatalf("want isError with the violation at /size: %+v", resultJSON(t, res))
	}
	wantErrorMeta(t, res, wire.CodeInvalidArguments, false)
	if res.Meta[wire.MetaExecutionID] != nil {
		t.Fatalf("a refused call has an execution id")
	}
	res, err = mcpCall(t, cs, "provision", `{"size":2}`, identityMeta("schema", 0))
	wantExecuted(t, res, err, false)
	if n := tool.total.Load(); n != 1 {
		t.Fatalf("tool ran %d times, want 1", n)
	}
}

func wantErrorMeta(t testing.TB, res *mcp.CallToolResult, code string, retryable bool) {
	t.Helper()
	got := resultJSON(t, res)["_meta"].(map[string]any)[wire.MetaError]
	want := map[string]any{"code": code, "retryable": retryable}
	if !jsonEqual(t, mustMarshal(t, got), mustMarshal(t, want)) {
		t.Fatalf("_meta error = %v, want %v", got, want)
	}
}

// TestMCPToolOutcomes: recorded 4xx are isError results that replay; tool
// failures, timeouts and 5xx are isError results with a retryable code,
// not recorded, so the same call runs again.
func TestMCPToolOutcomes(t *testing.T) {
	tool := newTestTool("provision")
	tool.behave = func(ctx context.Context, req *tools.Request) (*tools.Response, error) {
		var args struct{ Mode string }
		_ = json.Unmarshal(req.Arguments, &args)
		switch args.Mode {
		case "missing":
			return tools.JSON(404, map[string]any{"error": "no such zone"})
		case "down":
			return &tools.Response{Status: 503, ContentType: "text/plain", Body: []byte("backend down")}, nil
		case "busy":
			return tools.JSON(429, map[string]any{"error": "slow down"})
		case "error":
			return nil, errors.New("boom")
		case "slow":
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return tools.JSON(200, map[string]any{"ok": true})
	}
	h := newHarness(t, storeEmbedded, []tools.Tool{tool}, withPolicy("provision", tools.Policy{Timeout: 200 * time.Millisecond}))
	cs := h.mcpSession(mcpClientOptions{})

	res, err := mcpCall(t, cs, "provision", `{"mode":"missing"}`, identityMeta("outcomes", 0))
	wantExecuted(t, res, err, false)
	if !res.IsError || resultText(t, res) != `{"error":"no such zone"}` || res.Meta[wire.MetaError] != nil {
		t.Fatalf("recorded 404: %+v", resultJSON(t, res))
	}
	res, err = mcpCall(t, cs, "provision", `{"mode":"missing"}`, identityMeta("outcomes", 0))
	wantExecuted(t, res, err, true)
	if !res.IsError {
		t.Fatalf("replayed 404 without isError")
	}

	for i, c := range []struct{ mode, code, text string }{
		{"down", wire.CodeToolFailed, "backend down"},
		{"busy", wire.CodeToolFailed, `{"error":"slow down"}`},
		{"error", wire.CodeToolFailed, ""},
		{"slow", wire.CodeToolTimeout, ""},
	} {
		step := i + 1
		args := `{"mode":"` + c.mode + `"}`
		before := tool.total.Load()
		for attempt := range 2 {
			res, err := mcpCall(t, cs, "provision", args, identityMeta("outcomes", step))
			if err != nil {
				t.Fatalf("%s: protocol error: %v", c.mode, err)
			}
			wantExecuted(t, res, nil, false)
			wantErrorMeta(t, res, c.code, true)
			if !res.IsError || (c.text != "" && resultText(t, res) != c.text) {
				t.Fatalf("%s attempt %d: %+v", c.mode, attempt, resultJSON(t, res))
			}
		}
		if runs := tool.total.Load() - before; runs != 2 {
			t.Fatalf("%s: the tool ran %d times for 2 attempts; a failure must not be recorded", c.mode, runs)
		}
	}
}

// TestMCPInProgress: a duplicate waits up to mcp.in_progress_wait, then
// gets -32001 with retry_after_ms; once the call finished it replays.
func TestMCPInProgress(t *testing.T) {
	tool := newTestTool("provision")
	release := make(chan struct{})
	tool.behave = func(ctx context.Context, req *tools.Request) (*tools.Response, error) {
		<-release
		return tools.JSON(200, map[string]any{"done": true})
	}
	h := newHarness(t, storeEmbedded, []tools.Tool{tool}, withMCP(func(o *mcpOptions) { o.InProgressWait = 300 * time.Millisecond }))
	first := make(chan error, 1)
	go func() {
		_, err := mcpCall(t, h.mcpSession(mcpClientOptions{}), "provision", `{}`, identityMeta("wait", 0))
		first <- err
	}()
	eventually(t, 10*time.Second, "the tool to start", func() bool { return tool.total.Load() == 1 })
	cs := h.mcpSession(mcpClientOptions{})
	_, err := mcpCall(t, cs, "provision", `{}`, identityMeta("wait", 0))
	data := wantRPCError(t, err, wire.RPCRequestInProgress, wire.CodeRequestInProgress)
	if ms, _ := data["retry_after_ms"].(float64); ms < 1000 || data["retryable"] != true {
		t.Fatalf("request_in_progress data %v: want retry_after_ms ≥ 1000, retryable", data)
	}

	// A duplicate that is waiting when the call finishes gets the replay.
	waiting := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, _ := mcpCall(t, cs, "provision", `{}`, identityMeta("wait", 0))
		waiting <- res
	}()
	time.Sleep(50 * time.Millisecond)
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	res := <-waiting
	if res == nil || res.Meta[wire.MetaReplayed] != true {
		t.Fatalf("the waiting duplicate did not get the replay: %+v", res)
	}
	if n := tool.total.Load(); n != 1 {
		t.Fatalf("tool ran %d times", n)
	}
}

// TestMCPOutcomeUnknown: a record a dead gateway left UNKNOWN is -32002.
func TestMCPOutcomeUnknown(t *testing.T) {
	tool := newTestTool("pay")
	h := newHarness(t, storeEmbedded, []tools.Tool{tool}, withPolicy("pay", tools.Policy{LeaseExpiry: idempotency.LeaseExpiryUnknown}))
	args := `{"amount":5}`
	canonical, err := keyderive.Canonicalize([]byte(args))
	if err != nil {
		t.Fatal(err)
	}
	// A gateway claims the call and dies: its lease runs out.
	_, err = h.store.Claim(context.Background(), idempotency.ClaimRequest{
		Scope:        idempotency.Scope{Tenant: gateway.AnonymousTenant, Tool: "pay", Key: derivedKey(t, "unknown", 0, "pay", args)},
		Fingerprint:  keyderive.Fingerprint(canonical),
		StepGuard:    true,
		StepBoundKey: true,
		Step:         &idempotency.Step{SessionID: "unknown", Index: 0},
		ExecutionID:  "01JD8ZK3V6Q3H1T9W3C0X5N7RM",
		Owner:        "dead-gateway",
		LockTTL:      50 * time.Millisecond,
		ReplayTTL:    time.Hour,
		LeaseExpiry:  idempotency.LeaseExpiryUnknown,
	})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	cs := h.mcpSession(mcpClientOptions{})
	for range 2 {
		_, err := mcpCall(t, cs, "pay", args, identityMeta("unknown", 0))
		if data := wantRPCError(t, err, wire.RPCOutcomeUnknown, wire.CodeOutcomeUnknown); data["retryable"] != false {
			t.Fatalf("outcome_unknown retryable: %v", data)
		}
	}
	if n := tool.total.Load(); n != 0 {
		t.Fatalf("a tool whose outcome is unknown ran %d times", n)
	}
}

// TestMCPWithoutIdentity: read-only tools need none; mutating tools are
// refused without one unless mcp.allow_unkeyed, which runs them on every
// call, marked unprotected.
func TestMCPWithoutIdentity(t *testing.T) {
	lookup := newTestTool("lookup")
	lookup.readOnly = true
	provision := newTestTool("provision")
	strict := newHarness(t, storeEmbedded, []tools.Tool{lookup, provision})
	cs := strict.mcpSession(mcpClientOptions{})
	for range 2 {
		res, err := mcpCall(t, cs, "lookup", `{"q":"x"}`, nil)
		if err != nil || res.IsError || res.Meta[wire.MetaExecutionID] != nil || res.Meta[wire.MetaReplayed] != nil {
			t.Fatalf("read-only call: %v %+v", err, res)
		}
	}
	if n := lookup.total.Load(); n != 2 {
		t.Fatalf("read-only tool ran %d times, want every call", n)
	}
	_, err := mcpCall(t, cs, "provision", `{}`, nil)
	wantRPCError(t, err, wire.RPCInvalidParams, wire.CodeAgentSessionMissing)

	lenient := newHarness(t, storeEmbedded, []tools.Tool{provision}, withMCP(func(o *mcpOptions) { o.AllowUnkeyed = true }))
	cs = lenient.mcpSession(mcpClientOptions{})
	for range 2 {
		res, err := mcpCall(t, cs, "provision", `{}`, nil)
		if err != nil || res.Meta[wire.MetaIdempotency] != wire.MetaIdempotencyNone || res.Meta[wire.MetaReplayed] != nil {
			t.Fatalf("unkeyed call: %v %+v", err, res)
		}
	}
	if n := provision.total.Load(); n != 2 {
		t.Fatalf("unkeyed tool ran %d times, want every call", n)
	}
	// Part of an identity is still refused, and a keyed call is protected.
	_, err = mcpCall(t, cs, "provision", `{}`, mcp.Meta{wire.MetaSessionID: "s"})
	wantRPCError(t, err, wire.RPCInvalidParams, wire.CodeAgentStepMissing)
	for i := range 2 {
		res, err := mcpCall(t, cs, "provision", `{}`, identityMeta("s", 0))
		wantExecuted(t, res, err, i == 1)
	}
	if n := provision.total.Load(); n != 3 {
		t.Fatalf("tool ran %d times, want 3", n)
	}
}

// TestMCPTenants: a tenant never replays another tenant's call.
func TestMCPTenants(t *testing.T) {
	tool := newTestTool("provision")
	h := newHarness(t, storeEmbedded, []tools.Tool{tool}, withTenants(map[string]string{"acme": "acme-token", "umbrella": "umbrella-token"}))
	ids := map[string]string{}
	for _, token := range []string{"acme-token", "umbrella-token"} {
		cs := h.mcpSession(mcpClientOptions{token: token})
		for i := range 2 {
			res, err := mcpCall(t, cs, "provision", `{}`, identityMeta("same", 0))
			id := wantExecuted(t, res, err, i == 1)
			if i == 0 {
				ids[token] = id
			} else if ids[token] != id {
				t.Fatalf("%s replayed another execution", token)
			}
		}
	}
	if ids["acme-token"] == ids["umbrella-token"] || tool.total.Load() != 2 {
		t.Fatalf("tenants shared a record: %v, tool ran %d times", ids, tool.total.Load())
	}
	rec, err := h.store.Get(context.Background(), idempotency.Scope{Tenant: "umbrella", Tool: "provision", Key: derivedKey(t, "same", 0, "provision", `{}`)})
	if err != nil || rec.ExecutionID != ids["umbrella-token"] {
		t.Fatalf("umbrella's record: %+v %v", rec, err)
	}
}

// TestMCPReadOnlyIdentityAsREST: a read-only tool is handed a well-formed
// session and step beside a malformed key over MCP, as REST does with the
// headers; a malformed step hands it nothing; neither is refused.
func TestMCPReadOnlyIdentityAsREST(t *testing.T) {
	lookup := newTestTool("lookup")
	lookup.readOnly = true
	lookup.started = make(chan *tools.Request, 8)
	h := newHarness(t, storeEmbedded, []tools.Tool{lookup})
	cs := h.mcpSession(mcpClientOptions{})
	badKey := mcp.Meta{wire.MetaSessionID: "ro", wire.MetaStepIndex: 4, wire.MetaIdempotencyKey: "NOT-A-KEY"}
	res, err := mcpCall(t, cs, "lookup", `{}`, badKey)
	if err != nil || res.IsError {
		t.Fatalf("read-only call with a malformed key: %v %+v", err, res)
	}
	overREST := h.do(callSpec{tool: "lookup", args: `{}`, key: "NOT-A-KEY", headers: map[string]string{"Agent-Session-Id": "ro", "Agent-Step-Index": "4"}})
	if overREST.status != 200 {
		t.Fatalf("the same over REST: %d %s", overREST.status, overREST.body)
	}
	for door := range 2 {
		req := <-lookup.started
		if !req.HasStep || req.SessionID != "ro" || req.StepIndex != 4 {
			t.Fatalf("door %d: the tool got session %q step %d (has %v), want ro/4", door, req.SessionID, req.StepIndex, req.HasStep)
		}
	}
	res, err = mcpCall(t, cs, "lookup", `{}`, mcp.Meta{wire.MetaSessionID: "ro", wire.MetaStepIndex: "04"})
	if err != nil || res.IsError {
		t.Fatalf("read-only call with a malformed step: %v %+v", err, res)
	}
	if req := <-lookup.started; req.HasStep || req.SessionID != "" {
		t.Fatalf("a malformed step handed the tool session %q", req.SessionID)
	}
}
