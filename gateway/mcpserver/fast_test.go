package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/boltstore"
	"github.com/toolgateway/toolgateway/gateway/idempotency/redisstore"
	"github.com/toolgateway/toolgateway/keyderive"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// The differential test of the tools/call fast path (fast.go): every
// request is sent twice to the same gateway, once through go-sdk (the
// fast path switched off) and once through the fast path, and the two
// answers must be the same: HTTP status, every response header but Date
// and X-Request-Id, and the body byte for byte. Both sends meet the same
// record (a replay, a refusal, a running call), so they must answer the
// same bytes. A fresh execution cannot run twice under one key, so a
// fresh call is sent on each path under its own session with the same
// arguments, and the answers compared with the execution id (a new ULID
// per execution) blanked out; its replays are then compared whole.

// diffTool answers deterministically from its arguments: {"status": N}
// makes it answer N (500: a failure, not recorded), {"text": true} a text
// body, anything else a JSON object echoing the arguments.
type diffTool struct {
	spec tools.Spec

	mu   sync.Mutex
	runs int
}

func (t *diffTool) Spec() tools.Spec { return t.spec }

func (t *diffTool) Call(_ context.Context, req *tools.Request) (*tools.Response, error) {
	t.mu.Lock()
	t.runs++
	t.mu.Unlock()
	var args struct {
		Status int  `json:"status"`
		Text   bool `json:"text"`
	}
	_ = json.Unmarshal(req.Arguments, &args)
	switch {
	case args.Status != 0:
		return &tools.Response{Status: args.Status, ContentType: "application/json", Body: []byte(`{"refused":"<as asked> & no more"}`)}, nil
	case args.Text:
		return &tools.Response{Status: http.StatusOK, ContentType: "text/plain", Body: []byte("done: <" + string(req.Arguments) + ">")}, nil
	}
	return &tools.Response{Status: http.StatusOK, ContentType: "application/json", Body: append(append([]byte(`{"echo":`), req.Arguments...), '}')}, nil
}

// blockingTool runs until released, so a second call meets it running.
type blockingTool struct {
	started chan struct{}
	release chan struct{}
}

func (t *blockingTool) Spec() tools.Spec { return tools.Spec{Name: "hold"} }

func (t *blockingTool) Call(ctx context.Context, _ *tools.Request) (*tools.Response, error) {
	t.started <- struct{}{}
	select {
	case <-t.release:
	case <-ctx.Done():
	}
	return &tools.Response{Status: http.StatusOK, ContentType: "application/json", Body: []byte(`{}`)}, nil
}

// diffGateway is one gateway under the differential test.
type diffGateway struct {
	srv   *httptest.Server
	fast  *fastPathSwitch
	store idempotency.Store
}

func newDiffGateway(t *testing.T, store idempotency.Store, mcp Options, policies map[string]tools.Policy, ts ...tools.Tool) *diffGateway {
	return newDiffGatewayWith(t, nil, store, mcp, policies, ts...)
}

// newDiffGatewayWith is newDiffGateway with tune applied to the options.
func newDiffGatewayWith(t *testing.T, tune func(*gateway.Options), store idempotency.Store, mcp Options, policies map[string]tools.Policy, ts ...tools.Tool) *diffGateway {
	t.Helper()
	reg, err := tools.NewRegistryOf(ts...)
	if err != nil {
		t.Fatal(err)
	}
	fast := &fastPathSwitch{}
	mcp.fastPath = fast
	mcp.InProgressWait = -1 // a running call answers -32001 at once
	prom := prometheus.NewRegistry()
	opts := gateway.Options{
		Store: store, Tools: reg, Mounts: []gateway.Mount{Mount(mcp)},
		Policies:   policies,
		Logger:     slog.New(slog.DiscardHandler),
		Registerer: prom, Gatherer: prom,
	}
	if tune != nil {
		tune(&opts)
	}
	gw, err := gateway.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	return &diffGateway{srv: srv, fast: fast, store: store}
}

func newBoltStore(t *testing.T) idempotency.Store {
	t.Helper()
	s, err := boltstore.Open(filepath.Join(t.TempDir(), "gw.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// diffAnswer is what is compared of one answer.
type diffAnswer struct {
	status int
	header http.Header
	body   []byte
}

func (a diffAnswer) String() string {
	return fmt.Sprintf("HTTP %d %v\n%s", a.status, a.header, a.body)
}

// diffRequest is one tools/call POST.
type diffRequest struct {
	version string // Mcp-Protocol-Version ("" leaves it out)
	id      string // the JSON-RPC id as sent
	tool    string
	// arguments is the raw params.arguments ("" leaves it out).
	arguments string
	// meta are extra raw _meta members (the protocol's are added on
	// 2026-07-28 unless bareMeta).
	meta     map[string]string
	bareMeta bool
	// header overrides or adds HTTP headers ("" value: removed).
	header map[string]string
	// rawParams, when set, replaces params entirely.
	rawParams string
	// rawBody, when set, is the whole message.
	rawBody string
}

func (r diffRequest) body() []byte {
	if r.rawBody != "" {
		return []byte(r.rawBody)
	}
	params := r.rawParams
	if params == "" {
		var members []string
		members = append(members, `"name":`+strconv.Quote(r.tool))
		if r.arguments != "" {
			members = append(members, `"arguments":`+r.arguments)
		}
		var meta []string
		if r.version >= newestProtocolEra && !r.bareMeta {
			meta = append(meta, `"`+metaProtocolVersion+`":"`+r.version+`"`,
				`"`+metaClientCapabilities+`":{"roots":{"listChanged":true},"sampling":{}}`,
				`"`+metaClientInfo+`":{"name":"difftest","version":"1.0.0"}`)
		}
		for _, name := range slices.Sorted(maps.Keys(r.meta)) {
			meta = append(meta, strconv.Quote(name)+":"+r.meta[name])
		}
		if len(meta) > 0 {
			members = append(members, `"_meta":{`+strings.Join(meta, ",")+`}`)
		}
		params = "{" + strings.Join(members, ",") + "}"
	}
	id := r.id
	if id == "" {
		id = "7"
	}
	return []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":` + params + `}`)
}

// send posts r through the fast path or go-sdk.
func (g *diffGateway) send(t *testing.T, r diffRequest, fast bool) diffAnswer {
	t.Helper()
	g.fast.off.Store(!fast)
	req, err := http.NewRequest(http.MethodPost, g.srv.URL+"/mcp", bytes.NewReader(r.body()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if r.version != "" {
		req.Header.Set(protocolVersionHeader, r.version)
	}
	if r.version >= newestProtocolEra {
		req.Header.Set(headerMCPMethod, "tools/call")
		req.Header.Set(headerMCPName, r.tool)
	}
	for name, value := range r.header {
		if name == "Host" {
			req.Host = value
			continue
		}
		if value == "" {
			req.Header.Del(name)
		} else {
			req.Header.Set(name, value)
		}
	}
	resp, err := g.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	header := resp.Header.Clone()
	header.Del("Date")
	header.Del("X-Request-Id")
	return diffAnswer{status: resp.StatusCode, header: header, body: body}
}

// same sends r through both paths and requires the same answer; served
// says whether the fast path must have answered it (false: it must have
// left it to go-sdk).
func (g *diffGateway) same(t *testing.T, what string, r diffRequest, served bool) diffAnswer {
	t.Helper()
	slow := g.send(t, r, false)
	before := g.fast.served.Load()
	fast := g.send(t, r, true)
	if got := g.fast.served.Load() - before; got != map[bool]int64{true: 1, false: 0}[served] {
		t.Errorf("%s: the fast path served %d calls, want served=%v", what, got, served)
	}
	compareAnswers(t, what, slow, fast)
	return fast
}

// ulidPattern matches an execution id.
var ulidPattern = regexp.MustCompile(`[0-9A-HJKMNP-TV-Z]{26}`)

// fresh sends the same call under two sessions, one per path, and
// compares the answers but for the execution ids; it returns the
// requests, for their replays.
func (g *diffGateway) fresh(t *testing.T, what string, r diffRequest, identity func(session string) map[string]string) (slowReq, fastReq diffRequest) {
	t.Helper()
	slowReq, fastReq = r, r
	slowReq.meta, fastReq.meta = merge(r.meta, identity(what+"-go-sdk")), merge(r.meta, identity(what+"-fast"))
	slow := g.send(t, slowReq, false)
	before := g.fast.served.Load()
	fast := g.send(t, fastReq, true)
	if g.fast.served.Load() != before+1 {
		t.Errorf("%s: the fast path did not serve the fresh call", what)
	}
	if !bytes.Contains(fast.body, []byte(wire.MetaExecutionID)) {
		t.Errorf("%s: a fresh answer without its execution id: %s", what, fast.body)
	}
	slow.body = ulidPattern.ReplaceAll(slow.body, []byte("EXECUTION-ID"))
	fast.body = ulidPattern.ReplaceAll(fast.body, []byte("EXECUTION-ID"))
	compareAnswers(t, what+" (fresh)", slow, fast)
	return slowReq, fastReq
}

// want checks that an answer is the error class the scenario is about,
// so the comparison is not between two answers of another kind.
func want(t *testing.T, what string, a diffAnswer, fragment string) {
	t.Helper()
	if !bytes.Contains(a.body, []byte(fragment)) {
		t.Errorf("%s: answer %s lacks %s", what, a.body, fragment)
	}
}

func merge(a, b map[string]string) map[string]string {
	out := maps.Clone(a)
	if out == nil {
		out = make(map[string]string, len(b))
	}
	maps.Copy(out, b)
	return out
}

func compareAnswers(t *testing.T, what string, slow, fast diffAnswer) {
	t.Helper()
	if slow.status != fast.status || !bytes.Equal(slow.body, fast.body) || fmt.Sprint(slow.header) != fmt.Sprint(fast.header) {
		t.Errorf("%s: the answers differ\ngo-sdk: %s\nfast:   %s", what, slow, fast)
	}
}

// gatewayIdentity is the gateway's identity in _meta (derived key left
// out; the gateway derives it).
func gatewayIdentity(step int) func(string) map[string]string {
	return func(session string) map[string]string {
		return map[string]string{
			wire.MetaSessionID: strconv.Quote(session),
			wire.MetaStepIndex: strconv.Itoa(step),
		}
	}
}

func TestMCPFastPathAnswersAsGoSDK(t *testing.T) {
	echo := &diffTool{spec: tools.Spec{Name: "echo", InputSchema: []byte(`{"type":"object"}`)}}
	strict := &diffTool{spec: tools.Spec{Name: "strict", InputSchema: []byte(`{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}`)}}
	look := &diffTool{spec: tools.Spec{Name: "look", ReadOnly: true}}
	pay := &diffTool{spec: tools.Spec{Name: "pay"}}
	hold := &blockingTool{started: make(chan struct{}, 1), release: make(chan struct{})}
	defer close(hold.release)
	g := newDiffGateway(t, newBoltStore(t), Options{}, map[string]tools.Policy{"pay": {LeaseExpiry: idempotency.LeaseExpiryUnknown}},
		echo, strict, look, pay, hold)
	unkeyed := newDiffGateway(t, newBoltStore(t), Options{AllowUnkeyed: true}, nil, echo)
	// max_body_bytes 256: arguments over it are refused over MCP as over REST.
	small := newDiffGatewayWith(t, func(o *gateway.Options) { o.MaxBodyBytes = 256 }, newBoltStore(t), Options{}, nil, look)
	gw := g
	// A store whose Redis client is gone: every decision fails at once.
	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	_ = down.Close()
	storeDown := newDiffGateway(t, redisstore.New(down, redisstore.Options{Prefix: "never:"}), Options{}, nil, echo)

	// A call a gateway that died left running: its lease is over, and the
	// tool's lease_expiry is unknown.
	unknownArgs := `{"amount":5}`
	canonical, err := keyderive.Canonicalize([]byte(unknownArgs))
	if err != nil {
		t.Fatal(err)
	}
	unknownKey, _, err := keyderive.Derive("unknown", 0, "pay", []byte(unknownArgs))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.store.Claim(context.Background(), idempotency.ClaimRequest{
		Scope:       idempotency.Scope{Tenant: gateway.AnonymousTenant, Tool: "pay", Key: unknownKey},
		Fingerprint: keyderive.Fingerprint(canonical), StepGuard: true, StepBoundKey: true,
		Step:        &idempotency.Step{SessionID: "unknown", Index: 0},
		ExecutionID: "01JD8ZK3V6Q3H1T9W3C0X5N7RM", Owner: "dead-gateway",
		LockTTL: 50 * time.Millisecond, ReplayTTL: time.Hour, LeaseExpiry: idempotency.LeaseExpiryUnknown,
	}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)

	// A call running now (through REST), for request_in_progress.
	holdKey, _, err := keyderive.Derive("held", 0, "hold", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		req, _ := http.NewRequest(http.MethodPost, g.srv.URL+"/api/tools/v1/hold", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(wire.HeaderSessionID, "held")
		req.Header.Set(wire.HeaderStepIndex, "0")
		req.Header.Set(wire.HeaderIdempotencyKey, holdKey)
		if resp, err := g.srv.Client().Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	<-hold.started

	for _, version := range []string{"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"} {
		t.Run(version, func(t *testing.T) {
			v := func(r diffRequest) diffRequest { r.version = version; return r }
			name := func(s string) string { return version + "-" + s }

			// Executed, then replayed: a JSON object body, a text body,
			// HTML characters, absent arguments, a string request id.
			for label, args := range map[string]string{
				"object": `{"n":1,"s":"<b>&amp;</b> \u2028"}`, "text": `{"text":true}`, "absent": "", "string-id": `{"n":2}`,
			} {
				r := v(diffRequest{tool: "echo", arguments: args})
				if label == "string-id" {
					r.id = `"req-1"`
				}
				slowReq, fastReq := g.fresh(t, name(label), r, gatewayIdentity(0))
				g.same(t, name(label)+" replay of go-sdk's", slowReq, true)
				g.same(t, name(label)+" replay of the fast path's", fastReq, true)
			}
			// A recorded 4xx (isError, replayed as such); a failure that
			// is not recorded (isError, retryable).
			slowReq, _ := g.fresh(t, name("4xx"), v(diffRequest{tool: "echo", arguments: `{"status":409}`}), gatewayIdentity(0))
			g.same(t, name("4xx replay"), slowReq, true)
			g.fresh(t, name("5xx"), v(diffRequest{tool: "echo", arguments: `{"status":500}`}), gatewayIdentity(0))

			// Host call ids: executed, replayed, reused with other arguments.
			host := func(id string) func(string) map[string]string {
				return func(session string) map[string]string {
					return map[string]string{"claudecode/toolUseId": strconv.Quote(session + id)}
				}
			}
			slowReq, fastReq := g.fresh(t, name("host"), v(diffRequest{tool: "echo", arguments: `{"n":3}`}), host("tu"))
			g.same(t, name("host replay"), slowReq, true)
			reused := fastReq
			reused.arguments = `{"n":4}`
			want(t, name("host reused"), g.same(t, name("host reused"), reused, true), `"code":"idempotency_key_reused"`)

			// Refusals about the request.
			step := func(meta map[string]string) diffRequest {
				return v(diffRequest{tool: "echo", arguments: `{"n":5}`, meta: meta})
			}
			g.same(t, name("bad step"), step(map[string]string{wire.MetaSessionID: `"s"`, wire.MetaStepIndex: `"x"`}), true)
			g.same(t, name("fractional step"), step(map[string]string{wire.MetaSessionID: `"s"`, wire.MetaStepIndex: `3.0`}), true)
			want(t, name("no identity"), g.same(t, name("no identity"), step(nil), true), `"code":"agent_session_missing"`)
			g.same(t, name("key mismatch"), step(map[string]string{wire.MetaSessionID: `"s"`, wire.MetaStepIndex: `1`,
				wire.MetaIdempotencyKey: `"` + strings.Repeat("ab", 32) + `"`}), true)
			g.same(t, name("metadata conflict"), diffRequest{version: version, tool: "echo", arguments: `{"n":5}`,
				meta:   map[string]string{wire.MetaSessionID: `"s"`, wire.MetaStepIndex: `1`},
				header: map[string]string{wire.HeaderSessionID: "other"}}, true)
			// The step guard: the same step with other arguments.
			conflicted, _ := g.fresh(t, name("step"), v(diffRequest{tool: "echo", arguments: `{"n":6}`}), gatewayIdentity(4))
			conflicted.arguments = `{"n":7}`
			want(t, name("step conflict"), g.same(t, name("step conflict"), conflicted, true), `"code":"step_conflict"`)
			// Schema violations: a tool result the model can act on.
			g.same(t, name("invalid arguments"), v(diffRequest{tool: "strict", arguments: `{"x":"one"}`,
				meta: gatewayIdentity(0)(name("strict"))}), true)
			g.same(t, name("duplicate argument names"), v(diffRequest{tool: "echo", arguments: `{"n":1,"n":2}`,
				meta: gatewayIdentity(0)(name("dup"))}), true)
			// Still running; an outcome nobody knows; a store that is down.
			want(t, name("in progress"), g.same(t, name("in progress"), v(diffRequest{tool: "hold", arguments: `{}`, meta: gatewayIdentity(0)("held")}), true), `"code":-32001`)
			want(t, name("outcome unknown"), g.same(t, name("outcome unknown"), v(diffRequest{tool: "pay", arguments: unknownArgs, meta: gatewayIdentity(0)("unknown")}), true), `"code":-32002`)
			want(t, name("store down"), storeDown.same(t, name("store down"), v(diffRequest{tool: "echo", arguments: `{}`, meta: gatewayIdentity(0)(name("down"))}), true), `"code":-32003`)
			// A read-only tool needs no identity; allow_unkeyed runs a
			// mutating tool without one, unprotected.
			g.same(t, name("read-only"), v(diffRequest{tool: "look", arguments: `{"q":1}`}), true)
			want(t, name("unkeyed"), unkeyed.same(t, name("unkeyed"), v(diffRequest{tool: "echo", arguments: `{"n":8}`}), true), `"io.github.toolgateway/idempotency":"none"`)

			// Left to go-sdk (and dispatchCall): an unknown tool, arguments
			// that are not an object, params the fast path does not read.
			want(t, name("unknown tool"), g.same(t, name("unknown tool"), v(diffRequest{tool: "nope", arguments: `{}`}), false), `"code":"tool_not_found"`)
			g.same(t, name("array arguments"), v(diffRequest{tool: "echo", arguments: `[1]`, meta: gatewayIdentity(0)(name("arr"))}), false)
			g.same(t, name("null arguments"), v(diffRequest{tool: "echo", arguments: `null`, meta: gatewayIdentity(0)(name("null"))}), false)
			extra := v(diffRequest{tool: "echo"})
			extra.rawParams = `{"name":"echo","arguments":{},"task":{"ttl":5}}`
			g.same(t, name("extra params"), extra, false)
			g.same(t, name("Last-Event-ID"), v(diffRequest{tool: "look", arguments: `{}`, header: map[string]string{headerLastEventID: "1"}}), false)
			g.same(t, name("Accept JSON only"), v(diffRequest{tool: "look", arguments: `{}`, header: map[string]string{"Accept": "application/json"}}), false)
			g.same(t, name("Accept */*"), v(diffRequest{tool: "look", arguments: `{}`, header: map[string]string{"Accept": "*/*"}}), true)
			g.same(t, name("foreign Host"), v(diffRequest{tool: "look", arguments: `{}`, header: map[string]string{"Host": "evil.example"}}), false)
			if version >= newestProtocolEra {
				g.same(t, name("no Mcp-Name"), v(diffRequest{tool: "look", arguments: `{}`, header: map[string]string{headerMCPName: ""}}), false)
				g.same(t, name("other Mcp-Name"), v(diffRequest{tool: "look", arguments: `{}`, header: map[string]string{headerMCPName: "echo"}}), false)
				g.same(t, name("bare _meta"), v(diffRequest{tool: "look", arguments: `{}`, bareMeta: true}), false)
				noCaps := v(diffRequest{tool: "look", arguments: `{}`, bareMeta: true, meta: map[string]string{metaProtocolVersion: `"2026-07-28"`}})
				g.same(t, name("no clientCapabilities"), noCaps, false)
				badCaps := v(diffRequest{tool: "look", arguments: `{}`, bareMeta: true, meta: map[string]string{
					metaProtocolVersion: `"2026-07-28"`, metaClientCapabilities: `{"sampling":5}`}})
				g.same(t, name("bad clientCapabilities"), badCaps, false)
				badRoots := v(diffRequest{tool: "look", arguments: `{}`, bareMeta: true, meta: map[string]string{
					metaProtocolVersion: `"2026-07-28"`, metaClientCapabilities: `{"roots":{"listChanged":"yes"}}`}})
				g.same(t, name("bad roots capability"), badRoots, false)
				badInfo := v(diffRequest{tool: "look", arguments: `{}`, bareMeta: true, meta: map[string]string{
					metaProtocolVersion: `"2026-07-28"`, metaClientCapabilities: `{}`, metaClientInfo: `{"name":5}`}})
				g.same(t, name("bad clientInfo"), badInfo, false)
				nullInfo := v(diffRequest{tool: "look", arguments: `{}`, bareMeta: true, meta: map[string]string{
					metaProtocolVersion: `"2026-07-28"`, metaClientCapabilities: `{}`, metaClientInfo: `null`}})
				g.same(t, name("null clientInfo"), nullInfo, false)
			} else {
				withVersion := v(diffRequest{tool: "look", arguments: `{}`, meta: map[string]string{metaProtocolVersion: `"` + version + `"`}})
				g.same(t, name("_meta protocolVersion"), withVersion, false)
			}
		})
	}
	// The envelope as sent: what the guard refuses is refused alike (the
	// fast path leaves it to the guard); odd but valid spelling is served.
	t.Run("envelope", func(t *testing.T) {
		const version = "2025-11-25"
		raw := func(body string) diffRequest {
			return diffRequest{version: version, tool: "look", rawBody: body}
		}
		for what, tc := range map[string]struct {
			body   string
			served bool
		}{
			"spaced":              {" {\n \"jsonrpc\" : \"2.0\" ,\t\"id\":-3, \"method\":\"tools/call\",\"params\":{ \"name\" : \"look\" , \"arguments\" : { \"q\" : [ 1 , { } ] } } }\n", true},
			"members reordered":   {`{"params":{"arguments":{},"name":"look"},"method":"tools/call","id":"x\"y","jsonrpc":"2.0"}`, true},
			"escaped tool name":   {`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"l\u006fok","arguments":{}}}`, true},
			"duplicate id":        {`{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{"name":"look"}}`, false},
			"duplicate name":      {`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"look","name":"echo"}}`, false},
			"escaped duplicate":   {`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"look","n\u0061me":"echo"}}`, false},
			"duplicate _meta":     {`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"look","_meta":{"a":1,"a":2}}}`, false},
			"fractional id":       {`{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"look"}}`, false},
			"id too large":        {`{"jsonrpc":"2.0","id":9007199254740992,"method":"tools/call","params":{"name":"look"}}`, false},
			"null id":             {`{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"look"}}`, false},
			"no id":               {`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"look"}}`, false},
			"JSON-RPC 1.0":        {`{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"look"}}`, false},
			"extra member":        {`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"look"},"x":1}`, false},
			"no params":           {`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`, false},
			"tool name not text":  {`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5}}`, false},
			"other method":        {`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, false},
			"arguments too large": {`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"look","arguments":{"s":"` + strings.Repeat("x", 300) + `"}}}`, false},
		} {
			g := small
			if what != "arguments too large" {
				g = gw
			}
			answer := g.same(t, what, raw(tc.body), tc.served)
			if what == "arguments too large" {
				want(t, what, answer, `"code":"payload_too_large"`)
			}
		}
	})
	t.Run("no protocol version header", func(t *testing.T) {
		g.same(t, "no header", diffRequest{tool: "look", arguments: `{}`}, false)
	})
	t.Run("unknown newer version", func(t *testing.T) {
		g.same(t, "2027-01-01", diffRequest{version: "2027-01-01", tool: "look", arguments: `{}`}, false)
	})
	if echo.runs == 0 || look.runs == 0 {
		t.Fatalf("the tools did not run (echo %d, look %d)", echo.runs, look.runs)
	}
}

// TestMCPFastPathServesTheGoSDKClient: the official Go client's calls
// (go-sdk v1.8.0, which speaks 2026-07-28) take the fast path, executed
// and replayed alike, and tools/list stays go-sdk's.
func TestMCPFastPathServesTheGoSDKClient(t *testing.T) {
	echo := &diffTool{spec: tools.Spec{Name: "echo", InputSchema: []byte(`{"type":"object"}`)}}
	g := newDiffGateway(t, newBoltStore(t), Options{}, nil, echo)
	client := mcp.NewClient(&mcp.Implementation{Name: "fast-path-test", Version: "1"}, nil)
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: g.srv.URL + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if list, err := cs.ListTools(t.Context(), nil); err != nil || len(list.Tools) != 1 {
		t.Fatalf("tools/list: %v %+v", err, list)
	}
	params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"n": 1},
		Meta: mcp.Meta{wire.MetaSessionID: "go-client", wire.MetaStepIndex: 0}}
	for i, wantReplayed := range []bool{false, true} {
		res, err := cs.CallTool(t.Context(), params)
		if err != nil || res.IsError || res.Meta[wire.MetaReplayed] != wantReplayed {
			t.Fatalf("call %d: %v %+v", i, err, res)
		}
	}
	if served := g.fast.served.Load(); served != 2 {
		t.Fatalf("the fast path served %d of the client's 2 calls", served)
	}
	if echo.runs != 1 {
		t.Fatalf("the tool ran %d times, want 1", echo.runs)
	}
}
