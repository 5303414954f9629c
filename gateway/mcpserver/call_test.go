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

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/gatewaytest"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/mcpserver"
	"github.com/toolgateway/toolgateway/keyderive"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

func TestMCPCallAndReplay(t *testing.T) {
	tool := newTestTool("provision")
	tool.Schema = `{"type":"object","properties":{"size":{"type":"integer","minimum":1}},"required":["size"]}`
	h := newHarness(t, storeEmbedded, []tools.Tool{tool})
	for i, version := range mcpProtocolVersions {
		t.Run(version, func(t *testing.T) {
			cs := h.MCPSession(mcpClientOptions{Version: version})
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
			cs2 := h.MCPSession(mcpClientOptions{Version: version})
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
	if n := tool.Total.Load(); n != int64(len(mcpProtocolVersions)) {
		t.Fatalf("tool ran %d times, want once per protocol version", n)
	}
}

func TestMCPStepConflict(t *testing.T) {
	provision := newTestTool("provision")
	teardown := newTestTool("teardown")
	h := newHarness(t, storeEmbedded, []tools.Tool{provision, teardown})
	cs := h.MCPSession(mcpClientOptions{})
	res, err := mcpCall(t, cs, "provision", `{"size":1}`, identityMeta("conflict", 3))
	id := wantExecuted(t, res, err, false)

	for _, c := range []struct{ tool, args string }{{"provision", `{"size":2}`}, {"teardown", `{"size":1}`}} {
		_, err := mcpCall(t, cs, c.tool, c.args, identityMeta("conflict", 3))
		data := wantRPCError(t, err, wire.RPCInvalidParams, wire.CodeStepConflict)
		if data["tool"] != "provision" || data["execution_id"] != id || data["retryable"] != false {
			t.Fatalf("step_conflict data %v, want tool provision and execution_id %s", data, id)
		}
	}
	if provision.Total.Load() != 1 || teardown.Total.Load() != 0 {
		t.Fatalf("runs: provision %d, teardown %d", provision.Total.Load(), teardown.Total.Load())
	}
}

// TestMCPConcurrentDuplicates fires 20 identical calls at once, each from
// its own client: the tool runs once, and every client gets its outcome.
func TestMCPConcurrentDuplicates(t *testing.T) {
	for _, kind := range allStores {
		t.Run(string(kind), func(t *testing.T) {
			tool := newTestTool("provision")
			release := make(chan struct{})
			tool.Behave = func(ctx context.Context, req *tools.Request) (*tools.Response, error) {
				<-release
				return tools.JSON(201, map[string]any{"id": "vm-1", "execution_id": req.ExecutionID})
			}
			h := newHarness(t, kind, []tools.Tool{tool})
			const n = 20
			sessions := make([]*mcp.ClientSession, n)
			for i := range sessions {
				sessions[i] = h.MCPSession(mcpClientOptions{Version: mcpProtocolVersions[i%2]})
			}
			var wg sync.WaitGroup
			results := make([]*mcp.CallToolResult, n)
			errs := make([]error, n)
			for i := range n {
				wg.Go(func() {
					results[i], errs[i] = mcpCall(t, sessions[i], "provision", `{"size":1}`, identityMeta("dup", 0))
				})
			}
			eventually(t, 10*time.Second, "the first call to start", func() bool { return tool.Total.Load() == 1 })
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
			if n := tool.Total.Load(); n != 1 || executed != 1 || len(ids) != 1 {
				t.Fatalf("tool ran %d times, %d results say executed, %d execution ids; want 1, 1, 1", n, executed, len(ids))
			}
		})
	}
}

// TestMCPAndRESTShareRecords: the same call over REST and MCP is one
// record, whichever comes first, and one step guard.
func TestMCPAndRESTShareRecords(t *testing.T) {
	tool := newTestTool("provision")
	h := newHarness(t, gatewaytest.Redis, []tools.Tool{tool})
	cs := h.MCPSession(mcpClientOptions{})
	args := `{"size":3,"region":"eu"}`

	// REST first, then MCP.
	rest := h.Do(callSpec{Tool: "provision", Session: "shared", Step: 1, Args: args})
	if rest.Status != 200 || rest.Header.Get("Idempotent-Replayed") != "false" {
		t.Fatalf("REST call: %d %v", rest.Status, rest.Header)
	}
	res, err := mcpCall(t, cs, "provision", `{"region":"eu","size":3}`, identityMeta("shared", 1))
	if id := wantExecuted(t, res, err, true); id != rest.Header.Get("Tool-Execution-Id") {
		t.Fatalf("MCP replay has execution id %s, REST %s", id, rest.Header.Get("Tool-Execution-Id"))
	}
	if resultText(t, res) != string(rest.Body) {
		t.Fatalf("MCP text %q differs from the REST body %q", resultText(t, res), rest.Body)
	}

	// MCP first, then REST.
	res, err = mcpCall(t, cs, "provision", args, identityMeta("shared", 2))
	id := wantExecuted(t, res, err, false)
	rest = h.Do(callSpec{Tool: "provision", Session: "shared", Step: 2, Args: args})
	if rest.Status != 200 || rest.Header.Get("Idempotent-Replayed") != "true" || rest.Header.Get("Tool-Execution-Id") != id {
		t.Fatalf("REST after MCP: %d %v", rest.Status, rest.Header)
	}
	if string(rest.Body) != resultText(t, res) {
		t.Fatalf("REST body %q differs from the MCP text %q", rest.Body, resultText(t, res))
	}

	// One step guard: step 2 over REST with other arguments, step 1 over
	// MCP with other arguments.
	wantProblem(t, h.Do(callSpec{Tool: "provision", Session: "shared", Step: 2, Args: `{"size":4}`}), 422, wire.CodeStepConflict)
	_, err = mcpCall(t, cs, "provision", `{"size":4}`, identityMeta("shared", 1))
	wantRPCError(t, err, wire.RPCInvalidParams, wire.CodeStepConflict)

	// The key sent over MCP is the REST key.
	key := derivedKey(t, "shared", 2, "provision", args)
	meta := identityMeta("shared", 2)
	meta[wire.MetaIdempotencyKey] = key
	res, err = mcpCall(t, cs, "provision", args, meta)
	wantExecuted(t, res, err, true)
	if n := tool.Total.Load(); n != 2 {
		t.Fatalf("tool ran %d times, want 2", n)
	}
}

// TestMCPIdentityFromHeaders: a client that cannot send _meta may send the
// REST headers; both ways given, they must agree.
func TestMCPIdentityFromHeaders(t *testing.T) {
	tool := newTestTool("provision")
	h := newHarness(t, storeEmbedded, []tools.Tool{tool})
	byHeader := h.MCPSession(mcpClientOptions{Header: http.Header{"Agent-Session-Id": {"hdr"}, "Agent-Step-Index": {"9"}}})
	res, err := mcpCall(t, byHeader, "provision", `{}`, nil)
	id := wantExecuted(t, res, err, false)

	byMeta := h.MCPSession(mcpClientOptions{})
	res, err = mcpCall(t, byMeta, "provision", `{}`, identityMeta("hdr", 9))
	if wantExecuted(t, res, err, true) != id {
		t.Fatal("a call by _meta did not replay the same call by headers")
	}
	_, err = mcpCall(t, byHeader, "provision", `{}`, identityMeta("hdr", 10))
	wantRPCError(t, err, wire.RPCInvalidParams, wire.CodeIdempotencyMetadataConflict)
	_, err = mcpCall(t, byHeader, "provision", `{}`, identityMeta("other", 9))
	wantRPCError(t, err, wire.RPCInvalidParams, wire.CodeIdempotencyMetadataConflict)
	if n := tool.Total.Load(); n != 1 {
		t.Fatalf("tool ran %d times, want 1", n)
	}
}

// TestMCPBadInput: each bad tools/call gets the contract's error, and
// nothing is stored or run: afterwards the same step is still free.
func TestMCPBadInput(t *testing.T) {
	tool := newTestTool("provision")
	tool.Schema = `{"type":"object","properties":{"size":{"type":"integer"}}}`
	h := newHarness(t, storeEmbedded, []tools.Tool{tool})
	cs := h.MCPSession(mcpClientOptions{})
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
	r := h.RawMCP(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"provision","arguments":{"size":1e400},"_meta":{"io.github.toolgateway/sessionId":"bad","io.github.toolgateway/stepIndex":1}}}`, "2025-11-25", nil)
	if code, data := rpcErrorOf(t, r); code != wire.RPCInvalidParams || data["code"] != wire.CodeInvalidJSON {
		t.Fatalf("1e400: %d %s", r.Status, r.Body)
	}
	if n := tool.Total.Load(); n != 0 {
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
	tool.Schema = `{"type":"object","properties":{"size":{"type":"integer","minimum":1}},"required":["size"]}`
	h := newHarness(t, storeEmbedded, []tools.Tool{tool})
	cs := h.MCPSession(mcpClientOptions{})
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
	if n := tool.Total.Load(); n != 1 {
		t.Fatalf("tool ran %d times, want 1", n)
	}
}

// TestMCPToolOutcomes: recorded 4xx are isError results that replay; tool
// failures, timeouts and 5xx are isError results with a retryable code,
// not recorded, so the same call runs again.
func TestMCPToolOutcomes(t *testing.T) {
	tool := newTestTool("provision")
	tool.Behave = func(ctx context.Context, req *tools.Request) (*tools.Response, error) {
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
	cs := h.MCPSession(mcpClientOptions{})

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
		before := tool.Total.Load()
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
		if runs := tool.Total.Load() - before; runs != 2 {
			t.Fatalf("%s: the tool ran %d times for 2 attempts; a failure must not be recorded", c.mode, runs)
		}
	}
}

// TestMCPInProgress: a duplicate waits up to mcp.in_progress_wait, then
// gets -32001 with retry_after_ms; once the call finished it replays.
func TestMCPInProgress(t *testing.T) {
	tool := newTestTool("provision")
	release := make(chan struct{})
	tool.Behave = func(ctx context.Context, req *tools.Request) (*tools.Response, error) {
		<-release
		return tools.JSON(200, map[string]any{"done": true})
	}
	h := newHarness(t, storeEmbedded, []tools.Tool{tool}, withMCP(mcpserver.Options{InProgressWait: 300 * time.Millisecond}))
	first := make(chan error, 1)
	go func() {
		_, err := mcpCall(t, h.MCPSession(mcpClientOptions{}), "provision", `{}`, identityMeta("wait", 0))
		first <- err
	}()
	eventually(t, 10*time.Second, "the tool to start", func() bool { return tool.Total.Load() == 1 })
	cs := h.MCPSession(mcpClientOptions{})
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
	if n := tool.Total.Load(); n != 1 {
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
	_, err = h.Store.Claim(context.Background(), idempotency.ClaimRequest{
		Scope:        idempotency.Scope{Tenant: callpath.AnonymousTenant, Tool: "pay", Key: derivedKey(t, "unknown", 0, "pay", args)},
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
	cs := h.MCPSession(mcpClientOptions{})
	for range 2 {
		_, err := mcpCall(t, cs, "pay", args, identityMeta("unknown", 0))
		if data := wantRPCError(t, err, wire.RPCOutcomeUnknown, wire.CodeOutcomeUnknown); data["retryable"] != false {
			t.Fatalf("outcome_unknown retryable: %v", data)
		}
	}
	if n := tool.Total.Load(); n != 0 {
		t.Fatalf("a tool whose outcome is unknown ran %d times", n)
	}
}

// TestMCPWithoutIdentity: read-only tools need none; mutating tools are
// refused without one unless mcp.allow_unkeyed, which runs them on every
// call, marked unprotected.
func TestMCPWithoutIdentity(t *testing.T) {
	lookup := newTestTool("lookup")
	lookup.ReadOnly = true
	provision := newTestTool("provision")
	strict := newHarness(t, storeEmbedded, []tools.Tool{lookup, provision})
	cs := strict.MCPSession(mcpClientOptions{})
	for range 2 {
		res, err := mcpCall(t, cs, "lookup", `{"q":"x"}`, nil)
		if err != nil || res.IsError || res.Meta[wire.MetaExecutionID] != nil || res.Meta[wire.MetaReplayed] != nil {
			t.Fatalf("read-only call: %v %+v", err, res)
		}
	}
	if n := lookup.Total.Load(); n != 2 {
		t.Fatalf("read-only tool ran %d times, want every call", n)
	}
	_, err := mcpCall(t, cs, "provision", `{}`, nil)
	wantRPCError(t, err, wire.RPCInvalidParams, wire.CodeAgentSessionMissing)

	lenient := newHarness(t, storeEmbedded, []tools.Tool{provision}, withMCP(mcpserver.Options{AllowUnkeyed: true}))
	cs = lenient.MCPSession(mcpClientOptions{})
	for range 2 {
		res, err := mcpCall(t, cs, "provision", `{}`, nil)
		if err != nil || res.Meta[wire.MetaIdempotency] != wire.MetaIdempotencyNone || res.Meta[wire.MetaReplayed] != nil {
			t.Fatalf("unkeyed call: %v %+v", err, res)
		}
	}
	if n := provision.Total.Load(); n != 2 {
		t.Fatalf("unkeyed tool ran %d times, want every call", n)
	}
	// Part of an identity is still refused, and a keyed call is protected.
	_, err = mcpCall(t, cs, "provision", `{}`, mcp.Meta{wire.MetaSessionID: "s"})
	wantRPCError(t, err, wire.RPCInvalidParams, wire.CodeAgentStepMissing)
	for i := range 2 {
		res, err := mcpCall(t, cs, "provision", `{}`, identityMeta("s", 0))
		wantExecuted(t, res, err, i == 1)
	}
	if n := provision.Total.Load(); n != 3 {
		t.Fatalf("tool ran %d times, want 3", n)
	}
}

// TestMCPTenants: a tenant never replays another tenant's call.
func TestMCPTenants(t *testing.T) {
	tool := newTestTool("provision")
	h := newHarness(t, storeEmbedded, []tools.Tool{tool}, withTenants(map[string]string{"acme": "acme-token", "umbrella": "umbrella-token"}))
	ids := map[string]string{}
	for _, token := range []string{"acme-token", "umbrella-token"} {
		cs := h.MCPSession(mcpClientOptions{Token: token})
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
	if ids["acme-token"] == ids["umbrella-token"] || tool.Total.Load() != 2 {
		t.Fatalf("tenants shared a record: %v, tool ran %d times", ids, tool.Total.Load())
	}
	rec, err := h.Store.Get(context.Background(), idempotency.Scope{Tenant: "umbrella", Tool: "provision", Key: derivedKey(t, "same", 0, "provision", `{}`)})
	if err != nil || rec.ExecutionID != ids["umbrella-token"] {
		t.Fatalf("umbrella's record: %+v %v", rec, err)
	}
}

// TestMCPReadOnlyIdentityAsREST: a read-only tool is handed a well-formed
// session and step beside a malformed key over MCP, as REST does with the
// headers; a malformed step hands it nothing; neither is refused.
func TestMCPReadOnlyIdentityAsREST(t *testing.T) {
	lookup := newTestTool("lookup")
	lookup.ReadOnly = true
	lookup.Started = make(chan *tools.Request, 8)
	h := newHarness(t, storeEmbedded, []tools.Tool{lookup})
	cs := h.MCPSession(mcpClientOptions{})
	badKey := mcp.Meta{wire.MetaSessionID: "ro", wire.MetaStepIndex: 4, wire.MetaIdempotencyKey: "NOT-A-KEY"}
	res, err := mcpCall(t, cs, "lookup", `{}`, badKey)
	if err != nil || res.IsError {
		t.Fatalf("read-only call with a malformed key: %v %+v", err, res)
	}
	overREST := h.Do(callSpec{Tool: "lookup", Args: `{}`, Key: "NOT-A-KEY", Headers: map[string]string{"Agent-Session-Id": "ro", "Agent-Step-Index": "4"}})
	if overREST.Status != 200 {
		t.Fatalf("the same over REST: %d %s", overREST.Status, overREST.Body)
	}
	for door := range 2 {
		req := <-lookup.Started
		if !req.HasStep || req.SessionID != "ro" || req.StepIndex != 4 {
			t.Fatalf("door %d: the tool got session %q step %d (has %v), want ro/4", door, req.SessionID, req.StepIndex, req.HasStep)
		}
	}
	res, err = mcpCall(t, cs, "lookup", `{}`, mcp.Meta{wire.MetaSessionID: "ro", wire.MetaStepIndex: "04"})
	if err != nil || res.IsError {
		t.Fatalf("read-only call with a malformed step: %v %+v", err, res)
	}
	if req := <-lookup.Started; req.HasStep || req.SessionID != "" {
		t.Fatalf("a malformed step handed the tool session %q", req.SessionID)
	}
}
