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
	"os"
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

	"golang.org/x/tools/txtar"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/decide"
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
func newDiffGatewayWith(t *testing.T, tune func(*callpath.Options), store idempotency.Store, mcp Options, policies map[string]tools.Policy, ts ...tools.Tool) *diffGateway {
	t.Helper()
	reg, err := tools.NewRegistryOf(ts...)
	if err != nil {
		t.Fatal(err)
	}
	fast := &fastPathSwitch{}
	mcp.fastPath = fast
	mcp.InProgressWait = -1 // a running call answers -32001 at once
	prom := prometheus.NewRegistry()
	opts := callpath.Options{
		Store: store, Tools: reg, Mounts: []callpath.Mount{Mount(mcp)},
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
				`"`+metaClientCapabilities+`":{"roots":{"listChanged":true},"sampling":{},"elicitation":{}}`,
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

// scenariosValidatedWith is the go-sdk version the scenarios of
// testdata/fastpath were last run against, and gosdk.go copied from.
const scenariosValidatedWith = "v1.8.0"

// goSDKModule is go-sdk's module path.
const goSDKModule = "github.com/modelcontextprotocol/go-sdk"

// TestFastPathScenariosMatchGoSDK fails when go.mod requires (or replaces)
// another go-sdk than the one the fast path was validated against: the
// fast path copies go-sdk's behaviour (gosdk.go), and an upgrade that
// adds a check would leave it accepting what go-sdk refuses, with no other
// test failing.
func TestFastPathScenariosMatchGoSDK(t *testing.T) {
	gomod, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if err := checkValidatedGoSDK(gomod); err != nil {
		t.Fatal(err)
	}
	// The check itself: another version, or a replacement, fails it.
	for _, other := range []string{
		"require (\n\t" + goSDKModule + " v1.9.0\n)\n",
		"require " + goSDKModule + " v1.8.1\n",
		"require " + goSDKModule + " " + scenariosValidatedWith + "\nreplace " + goSDKModule + " => ../go-sdk\n",
	} {
		if checkValidatedGoSDK([]byte(other)) == nil {
			t.Errorf("go.mod %q passed the check", other)
		}
	}
}

// checkValidatedGoSDK says what to re-validate when go.mod requires (or
// replaces) another go-sdk than scenariosValidatedWith.
func checkValidatedGoSDK(gomod []byte) error {
	required, replaced := "", false
	for line := range strings.Lines(string(gomod)) {
		fields := strings.Fields(line)
		if len(fields) > 0 && (fields[0] == "require" || fields[0] == "replace") {
			replaced = replaced || fields[0] == "replace" && slices.Contains(fields, goSDKModule)
			fields = fields[1:]
		}
		if len(fields) >= 2 && fields[0] == goSDKModule {
			required = fields[1]
			replaced = replaced || slices.Contains(fields, "=>")
		}
	}
	if required == scenariosValidatedWith && !replaced {
		return nil
	}
	return fmt.Errorf("go.mod requires %s %s (replaced: %v), but the fast path was validated against %s. Before changing scenariosValidatedWith: "+
		"read go-sdk's changes to the streamable HTTP handler's checks (protocol versions, methods, Accept/Host/Last-Event-ID, "+
		"the SEP-2575 headers and _meta), the capabilities it decodes, its error-to-status mapping and the results it writes "+
		"(resultType, serverInfo); update gosdk.go to match; add a scenario in testdata/fastpath for every new check; "+
		"and run TestMCPFastPathAnswersAsGoSDK (or set mcp.fast_path: false until then)",
		goSDKModule, required, replaced, scenariosValidatedWith)
}

// fastPathVersions are the protocol versions the scenarios run on by
// default: every one go-sdk v1.8.0 serves (fastCallVersions).
var fastPathVersions = []string{"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

func TestMCPFastPathAnswersAsGoSDK(t *testing.T) {
	echo := &diffTool{spec: tools.Spec{Name: "echo", InputSchema: []byte(`{"type":"object"}`)}}
	strict := &diffTool{spec: tools.Spec{Name: "strict", InputSchema: []byte(`{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}`)}}
	look := &diffTool{spec: tools.Spec{Name: "look", ReadOnly: true}}
	pay := &diffTool{spec: tools.Spec{Name: "pay"}}
	hold := &blockingTool{started: make(chan struct{}, 1), release: make(chan struct{})}
	defer close(hold.release)
	g := newDiffGateway(t, newBoltStore(t), Options{}, map[string]tools.Policy{"pay": {LeaseExpiry: idempotency.LeaseExpiryUnknown}},
		echo, strict, look, pay, hold)
	// A store whose Redis client is gone: every decision fails at once.
	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	_ = down.Close()
	gateways := map[string]*diffGateway{
		"default": g,
		"unkeyed": newDiffGateway(t, newBoltStore(t), Options{AllowUnkeyed: true}, nil, echo),
		// max_body_bytes 256: arguments over it are refused over MCP as over REST.
		"small": newDiffGatewayWith(t, func(o *callpath.Options) { o.MaxBodyBytes = 256 }, newBoltStore(t), Options{}, nil, look),
		"down":  newDiffGateway(t, redisstore.New(down, redisstore.Options{Prefix: "never:"}), Options{}, nil, echo),
		// echo's calls wait for the caller's approval (approver: caller).
		"approve": newDiffGatewayWith(t, callerApproves(t, "echo"), newBoltStore(t), Options{}, nil, echo),
	}
	leaveUnknownRecord(t, g.store, "unknown", "pay", `{"amount":5}`)
	startHeldCall(t, g, hold, "held")

	files, err := filepath.Glob(filepath.Join("testdata", "fastpath", "*.txtar"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios in testdata/fastpath: %v", err)
	}
	for _, file := range files {
		archive, err := txtar.ParseFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range archive.Files {
			sc, err := parseScenario(f.Data)
			if err != nil {
				t.Fatalf("%s: %s: %v", file, f.Name, err)
			}
			gw := gateways[sc.gateway]
			if gw == nil {
				t.Fatalf("%s: %s: no gateway %q", file, f.Name, sc.gateway)
			}
			for _, version := range sc.versions {
				// The name is the sessions' too: no spaces.
				what := strings.ReplaceAll(strings.TrimSuffix(filepath.Base(file), ".txtar")+"/"+f.Name+"/"+version, " ", "_")
				gw.run(t, what, sc.request(version))
			}
		}
	}
	if echo.runs == 0 || look.runs == 0 {
		t.Fatalf("the tools did not run (echo %d, look %d)", echo.runs, look.runs)
	}
}

// scenario is one section of a testdata/fastpath archive (README.md there
// says what each key means).
type scenario struct {
	versions []string
	gateway  string
	req      diffRequest
	served   bool
	want     string
	// fresh, then: a new call per path under identity, replayed, and
	// (when thenArguments is set) sent again with other arguments.
	fresh         string
	noReplay      bool
	thenArguments string
	thenWant      string
}

// parseScenario reads one section: key: value lines, a blank line, then
// an optional raw message.
func parseScenario(data []byte) (*scenario, error) {
	sc := &scenario{versions: fastPathVersions, gateway: "default", req: diffRequest{meta: map[string]string{}, header: map[string]string{}}}
	text := string(data)
	head, body, _ := strings.Cut(text, "\n\n")
	sc.req.rawBody = strings.TrimSuffix(body, "\n")
	for line := range strings.Lines(head) {
		key, value, ok := strings.Cut(strings.TrimSuffix(line, "\n"), ":")
		if !ok {
			return nil, fmt.Errorf("%q is not key: value", line)
		}
		value = strings.TrimSpace(value)
		if err := sc.set(key, value); err != nil {
			return nil, err
		}
	}
	return sc, nil
}

// set sets one key of the scenario.
func (sc *scenario) set(key, value string) error {
	if name, ok := strings.CutPrefix(key, "meta "); ok {
		sc.req.meta[name] = value
		return nil
	}
	if name, ok := strings.CutPrefix(key, "header "); ok {
		sc.req.header[name] = value
		return nil
	}
	switch key {
	case "versions":
		sc.versions = map[string][]string{"all": fastPathVersions, "new": fastPathVersions[:1], "old": fastPathVersions[1:], "none": {""}}[value]
		if sc.versions == nil {
			sc.versions = strings.Fields(value)
		}
	case "gateway":
		sc.gateway = value
	case "tool":
		sc.req.tool = value
	case "id":
		sc.req.id = value
	case "arguments":
		sc.req.arguments = value
	case "params":
		sc.req.rawParams = value
	case "bare-meta":
		sc.req.bareMeta = value == "true"
	case "served":
		sc.served = value == "true"
	case "want":
		sc.want = value
	case "fresh":
		sc.fresh = value
	case "replay":
		sc.noReplay = value == "false"
	case "then-arguments":
		sc.thenArguments = value
	case "then-want":
		sc.thenWant = value
	default:
		return fmt.Errorf("unknown key %q", key)
	}
	return nil
}

// request is the scenario's request on a protocol version ($v in _meta
// values is the version).
func (sc *scenario) request(version string) scenarioRun {
	r := sc.req
	r.version = version
	r.meta = make(map[string]string, len(sc.req.meta))
	for name, value := range sc.req.meta {
		r.meta[name] = strings.ReplaceAll(value, "$v", version)
	}
	return scenarioRun{scenario: sc, req: r}
}

// scenarioRun is a scenario on one version.
type scenarioRun struct {
	*scenario
	req diffRequest
}

// run sends the scenario through both paths and compares the answers.
func (g *diffGateway) run(t *testing.T, what string, sc scenarioRun) {
	t.Helper()
	if sc.fresh == "" {
		answer := g.same(t, what, sc.req, sc.served)
		if sc.want != "" {
			want(t, what, answer, sc.want)
		}
		return
	}
	kind, arg, _ := strings.Cut(sc.fresh, " ")
	identity := func(session string) map[string]string {
		return map[string]string{"claudecode/toolUseId": strconv.Quote(session + arg)}
	}
	if kind == "gateway" {
		step, _ := strconv.Atoi(arg)
		identity = gatewayIdentity(step)
	}
	slowReq, fastReq := g.fresh(t, what, sc.req, identity)
	if sc.noReplay {
		return
	}
	g.same(t, what+" replay of go-sdk's", slowReq, true)
	g.same(t, what+" replay of the fast path's", fastReq, true)
	if sc.thenArguments != "" {
		again := fastReq
		again.arguments = sc.thenArguments
		want(t, what+" again", g.same(t, what+" again", again, true), sc.thenWant)
	}
}

// leaveUnknownRecord leaves the record of a call a gateway that died left
// running, its lease over and the tool's lease_expiry unknown: the next
// call of it meets outcome_unknown.
func leaveUnknownRecord(t *testing.T, store idempotency.Store, session, tool, args string) {
	t.Helper()
	canonical, err := keyderive.Canonicalize([]byte(args))
	if err != nil {
		t.Fatal(err)
	}
	key, _, err := keyderive.Derive(session, 0, tool, []byte(args))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Claim(context.Background(), idempotency.ClaimRequest{
		Scope:       idempotency.Scope{Tenant: callpath.AnonymousTenant, Tool: tool, Key: key},
		Fingerprint: keyderive.Fingerprint(canonical), StepGuard: true, StepBoundKey: true,
		Step:        &idempotency.Step{SessionID: session, Index: 0},
		ExecutionID: "01JD8ZK3V6Q3H1T9W3C0X5N7RM", Owner: "dead-gateway",
		LockTTL: 50 * time.Millisecond, ReplayTTL: time.Hour, LeaseExpiry: idempotency.LeaseExpiryUnknown,
	}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
}

// startHeldCall starts a call of hold (through REST) under session, step
// 0, and returns once it runs: its duplicates meet request_in_progress.
func startHeldCall(t *testing.T, g *diffGateway, hold *blockingTool, session string) {
	t.Helper()
	key, _, err := keyderive.Derive(session, 0, "hold", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		req, _ := http.NewRequest(http.MethodPost, g.srv.URL+"/api/tools/v1/hold", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(wire.HeaderSessionID, session)
		req.Header.Set(wire.HeaderStepIndex, "0")
		req.Header.Set(wire.HeaderIdempotencyKey, key)
		if resp, err := g.srv.Client().Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	<-hold.started
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

// TestMCPFastPathOff: with mcp.fast_path: false (Options.FastPathOff)
// every tools/call, the official client's included, is served by go-sdk's
// own path, with the same exactly-once answers.
func TestMCPFastPathOff(t *testing.T) {
	echo := &diffTool{spec: tools.Spec{Name: "echo", InputSchema: []byte(`{"type":"object"}`)}}
	g := newDiffGateway(t, newBoltStore(t), Options{FastPathOff: true}, nil, echo)
	r := diffRequest{version: "2026-07-28", tool: "echo", arguments: `{"n":1}`, meta: gatewayIdentity(0)("off")}
	first := g.send(t, r, true) // the test's switch says on; the operator's says off
	want(t, "fast path off", first, `"io.github.toolgateway/replayed":false`)
	want(t, "fast path off, replay", g.send(t, r, true), `"io.github.toolgateway/replayed":true`)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "fast-path-off", Version: "1"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: g.srv.URL + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"n": 2},
		Meta: mcp.Meta{wire.MetaSessionID: "off-client", wire.MetaStepIndex: 0}})
	if err != nil || res.IsError || res.Meta[wire.MetaReplayed] != false {
		t.Fatalf("the client's call: %v %+v", err, res)
	}
	if served := g.fast.served.Load(); served != 0 {
		t.Fatalf("the fast path served %d calls with mcp.fast_path: false", served)
	}
	if echo.runs != 2 {
		t.Fatalf("the tool ran %d times, want 2", echo.runs)
	}
}

// callerApproves makes every call of tool wait for its caller's approval
// (a decide rule with approver: caller).
func callerApproves(t *testing.T, tool string) func(*callpath.Options) {
	t.Helper()
	p, err := decide.Compile(tool, []decide.Rule{{Decision: decide.Approve, Approver: decide.Caller, Reason: "the user says yes"}})
	if err != nil {
		t.Fatal(err)
	}
	return func(o *callpath.Options) { o.Decisions = map[string]*decide.Policy{tool: p} }
}
