package gateway_test

// Acceptance tests written from the API contract (docs/api.md), one test per point
// that the other test files do not pin down precisely. They talk to the
// gateway over real HTTP only (plus the store, to prove nothing was written).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/tools/httptool"
	"github.com/toolgateway/toolgateway/wire"
)

// wholeSeconds is the contract's Retry-After: whole seconds ≥ 1.
var wholeSeconds = regexp.MustCompile(`^[1-9][0-9]*$`)

// wantContractProblem checks the complete RFC 9457 shape of section 2:
// type, title, status, detail, code and retryable, served as
// application/problem+json with a gateway-minted X-Request-Id.
func wantContractProblem(t testing.TB, r response, status int, code string, retryable bool) map[string]any {
	t.Helper()
	p := wantProblem(t, r, status, code)
	for _, member := range []string{"type", "title", "detail"} {
		if s, ok := p[member].(string); !ok || s == "" {
			t.Fatalf("%s: problem member %q missing or empty: %s", code, member, r.body)
		}
	}
	if got, ok := p["retryable"].(bool); !ok || got != retryable {
		t.Fatalf("%s: retryable = %v, want %v", code, p["retryable"], retryable)
	}
	wantRequestID(t, r.header)
	return p
}

// wantRequestID checks X-Request-Id is a ULID minted by the gateway.
func wantRequestID(t testing.TB, h http.Header) string {
	t.Helper()
	id := h.Get("X-Request-Id")
	if _, err := ulid.ParseStrict(id); err != nil {
		t.Fatalf("X-Request-Id %q is not a ULID: %v", id, err)
	}
	return id
}

// rawKey hashes the contract's key input by hand, independently of keyderive.
func rawKey(session string, step uint64, tool, canonical string) string {
	sum := sha256.Sum256([]byte(session + ":" + strconv.FormatUint(step, 10) + ":" + tool + ":" + canonical))
	return hex.EncodeToString(sum[:])
}

// scriptedTool answers by the "mode" member of its arguments.
func scriptedTool(name string) *testTool {
	tool := newTestTool(name)
	tool.behave = func(ctx context.Context, req *tools.Request) (*tools.Response, error) {
		var args struct {
			Mode string `json:"mode"`
		}
		_ = json.Unmarshal(req.Arguments, &args)
		switch args.Mode {
		case "fail":
			return nil, errors.New("scripted failure")
		case "unreachable":
			return nil, tools.ErrUpstreamUnreachable
		case "hang":
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return tools.JSON(200, map[string]any{"ok": true})
	}
	return tool
}

// TestContractEveryProblemHasTheFullShape walks each error code a client can
// provoke and checks status, code, retryable and the RFC 9457 members.
func TestContractEveryProblemHasTheFullShape(t *testing.T) {
	tool := scriptedTool("ct")
	tool.schema = `{"type":"object","properties":{"mode":{"type":"string"},"n":{"type":"integer"}}}`
	h := newHarness(t, storeEmbedded, []tools.Tool{tool}, withMaxBody(128),
		withPolicy("ct", tools.Policy{Timeout: 150 * time.Millisecond}))
	good := `{"n":1}`
	key := derivedKey(t, "shape", 1, "ct", good)
	hdr := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	cases := []struct {
		name      string
		c         callSpec
		status    int
		code      string
		retryable bool
	}{
		{"invalid_json", callSpec{tool: "ct", args: `{"n":`}, 400, wire.CodeInvalidJSON, false},
		{"invalid_arguments", callSpec{tool: "ct", session: "shape", step: 2, args: `{"n":"x"}`}, 400, wire.CodeInvalidArguments, false},
		{"idempotency_key_missing", callSpec{tool: "ct", args: good}, 400, wire.CodeIdempotencyKeyMissing, false},
		{"idempotency_key_malformed", callSpec{tool: "ct", args: good, key: "nothex"}, 400, wire.CodeIdempotencyKeyMalformed, false},
		{"agent_session_missing", callSpec{tool: "ct", args: good, key: key, headers: hdr("Agent-Step-Index", "1")}, 400, wire.CodeAgentSessionMissing, false},
		{"agent_session_malformed", callSpec{tool: "ct", args: good, key: key, headers: hdr("Agent-Session-Id", "a:b", "Agent-Step-Index", "1")}, 400, wire.CodeAgentSessionMalformed, false},
		{"agent_step_missing", callSpec{tool: "ct", args: good, key: key, headers: hdr("Agent-Session-Id", "shape")}, 400, wire.CodeAgentStepMissing, false},
		{"agent_step_malformed", callSpec{tool: "ct", args: good, key: key, headers: hdr("Agent-Session-Id", "shape", "Agent-Step-Index", "1.0")}, 400, wire.CodeAgentStepMalformed, false},
		{"tool_not_found", callSpec{tool: "no-such-tool", session: "shape", step: 1, args: good}, 404, wire.CodeToolNotFound, false},
		{"method_not_allowed", callSpec{tool: "ct", method: http.MethodPatch, args: good}, 405, wire.CodeMethodNotAllowed, false},
		{"payload_too_large", callSpec{tool: "ct", args: `{"s":"` + strings.Repeat("x", 200) + `"}`}, 413, wire.CodePayloadTooLarge, false},
		{"unsupported_media_type", callSpec{tool: "ct", session: "shape", step: 1, args: good, headers: hdr("Content-Type", "text/json")}, 415, wire.CodeUnsupportedMediaType, false},
		{"idempotency_key_mismatch", callSpec{tool: "ct", session: "shape", step: 3, args: good, key: key}, 422, wire.CodeIdempotencyKeyMismatch, false},
		{"tool_failed", callSpec{tool: "ct", session: "shape", step: 4, args: `{"mode":"fail"}`}, 500, wire.CodeToolFailed, true},
		{"upstream_unreachable", callSpec{tool: "ct", session: "shape", step: 5, args: `{"mode":"unreachable"}`}, 502, wire.CodeUpstreamUnreachable, true},
		{"tool_timeout", callSpec{tool: "ct", session: "shape", step: 6, args: `{"mode":"hang"}`}, 504, wire.CodeToolTimeout, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do(tc.c)
			p := wantContractProblem(t, r, tc.status, tc.code, tc.retryable)
			switch tc.code {
			case wire.CodeInvalidArguments:
				errs, ok := p["errors"].([]any)
				if !ok || len(errs) == 0 {
					t.Fatalf("invalid_arguments without errors[]: %s", r.body)
				}
				first := errs[0].(map[string]any)
				if first["location"] != "/n" || first["message"] == "" {
					t.Fatalf("errors[0] = %v, want location /n and a message", first)
				}
			case wire.CodeToolFailed, wire.CodeUpstreamUnreachable, wire.CodeToolTimeout:
				// Executed calls carry the execution headers whatever the status.
				if r.header.Get("Idempotent-Replayed") != "false" || r.header.Get("Tool-Execution-Id") == "" {
					t.Fatalf("%s lacks execution headers: %v", tc.code, r.header)
				}
			}
			if r.header.Get("Retry-After") != "" {
				t.Fatalf("%s must not carry Retry-After", tc.code)
			}
		})
	}
}

// TestContractRetryAfterIsWholeSeconds checks 409 request_in_progress and
// 503 store_unavailable carry Retry-After in whole seconds ≥ 1, even when
// the remaining lease is below one second, and outcome_unknown has none.
func TestContractRetryAfterIsWholeSeconds(t *testing.T) {
	tool := newTestTool("slow")
	release := make(chan struct{})
	tool.behave = func(ctx context.Context, req *tools.Request) (*tools.Response, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return tools.JSON(200, map[string]any{"ok": true})
	}
	store := &hookStore{Store: newStore(t, storeEmbedded)}
	h := newHarness(t, storeEmbedded, []tools.Tool{tool}, withStore(store), withLockTTL(600*time.Millisecond))
	unblock := sync.OnceFunc(func() { close(release) })
	t.Cleanup(unblock)

	c := callSpec{tool: "slow", session: "ra", step: 1, args: `{}`}
	first := make(chan response, 1)
	go func() {
		r, _ := h.try(c)
		first <- r
	}()
	eventually(t, 2*time.Second, "the tool to start", func() bool { return tool.total.Load() == 1 })
	r := h.do(c)
	wantContractProblem(t, r, 409, wire.CodeRequestInProgress, true)
	if ra := r.header.Get("Retry-After"); !wholeSeconds.MatchString(ra) {
		t.Fatalf("409 Retry-After %q, want whole seconds >= 1", ra)
	}
	unblock()
	if r := <-first; r.status != 200 {
		t.Fatalf("first call: %d %s", r.status, r.body)
	}

	store.down.Store(true)
	r = h.do(callSpec{tool: "slow", session: "ra", step: 2, args: `{}`})
	wantContractProblem(t, r, 503, wire.CodeStoreUnavailable, true)
	if ra := r.header.Get("Retry-After"); !wholeSeconds.MatchString(ra) {
		t.Fatalf("503 Retry-After %q, want whole seconds >= 1", ra)
	}
	if tool.total.Load() != 1 {
		t.Fatalf("the tool ran with the store down (fail closed): %d runs", tool.total.Load())
	}
}

// TestContractPreferWait checks Prefer: wait=N: a 409 only after N seconds
// when the call is still running, and N > 60 (even beyond any integer type)
// means "wait", not "ignore the preference".
func TestContractPreferWait(t *testing.T) {
	t.Run("still running after N seconds", func(t *testing.T) {
		tool := newTestTool("slow")
		release := make(chan struct{})
		tool.behave = func(ctx context.Context, req *tools.Request) (*tools.Response, error) {
			<-release
			return tools.JSON(200, map[string]any{"ok": true})
		}
		h := newHarness(t, storeEmbedded, []tools.Tool{tool})
		unblock := sync.OnceFunc(func() { close(release) })
		t.Cleanup(unblock)
		c := callSpec{tool: "slow", session: "pw", step: 1, args: `{}`}
		go func() { _, _ = h.try(c) }()
		eventually(t, 2*time.Second, "the tool to start", func() bool { return tool.total.Load() == 1 })
		w := c
		w.headers = map[string]string{"Prefer": "wait=1"}
		start := time.Now()
		r := h.do(w)
		waited := time.Since(start)
		wantContractProblem(t, r, 409, wire.CodeRequestInProgress, true)
		if !wholeSeconds.MatchString(r.header.Get("Retry-After")) {
			t.Fatalf("Retry-After %q", r.header.Get("Retry-After"))
		}
		if waited < 900*time.Millisecond {
			t.Fatalf("answered 409 after %v: Prefer: wait=1 was not honoured", waited)
		}
	})
	for _, n := range []string{"61", "3600", "99999999999999999999"} {
		t.Run("wait="+n+" waits", func(t *testing.T) {
			tool := newTestTool("slow")
			release := make(chan struct{})
			tool.behave = func(ctx context.Context, req *tools.Request) (*tools.Response, error) {
				<-release
				return tools.JSON(200, map[string]any{"exec": req.ExecutionID})
			}
			h := newHarness(t, storeEmbedded, []tools.Tool{tool})
			unblock := sync.OnceFunc(func() { close(release) })
			t.Cleanup(unblock)
			c := callSpec{tool: "slow", session: "pw", step: 2, args: `{}`}
			first := make(chan response, 1)
			go func() {
				r, _ := h.try(c)
				first <- r
			}()
			eventually(t, 2*time.Second, "the tool to start", func() bool { return tool.total.Load() == 1 })
			time.AfterFunc(200*time.Millisecond, unblock)
			w := c
			w.headers = map[string]string{"Prefer": "wait=" + n}
			r := h.do(w)
			a := <-first
			if r.status != 200 || r.header.Get("Idempotent-Replayed") != "true" || string(r.body) != string(a.body) {
				t.Fatalf("Prefer: wait=%s: %d %s, want the replay of %s", n, r.status, r.body, a.body)
			}
		})
	}
}

// TestContractEmptyHeaderCountsAsMissing sends each key header empty.
func TestContractEmptyHeaderCountsAsMissing(t *testing.T) {
	h := newHarness(t, storeEmbedded, []tools.Tool{newTestTool("echo")})
	for header, code := range map[string]string{
		"Idempotency-Key":  wire.CodeIdempotencyKeyMissing,
		"Agent-Session-Id": wire.CodeAgentSessionMissing,
		"Agent-Step-Index": wire.CodeAgentStepMissing,
	} {
		t.Run(header, func(t *testing.T) {
			r := h.do(callSpec{tool: "echo", session: "empty", step: 1, args: `{}`, headers: map[string]string{header: ""}})
			wantContractProblem(t, r, 400, code, false)
		})
	}
}

// TestContractFirstBadKeyHeaderWins checks the order Idempotency-Key,
// Agent-Session-Id, Agent-Step-Index when several are bad.
func TestContractFirstBadKeyHeaderWins(t *testing.T) {
	h := newHarness(t, storeEmbedded, []tools.Tool{newTestTool("echo")})
	key := derivedKey(t, "s", 1, "echo", `{}`)
	cases := []struct {
		name    string
		headers map[string]string
		code    string
	}{
		{"all three malformed", map[string]string{"Idempotency-Key": "x", "Agent-Session-Id": "a:b", "Agent-Step-Index": "01"}, wire.CodeIdempotencyKeyMalformed},
		{"key missing, others malformed", map[string]string{"Agent-Session-Id": "a:b", "Agent-Step-Index": "01"}, wire.CodeIdempotencyKeyMissing},
		{"session and step malformed", map[string]string{"Idempotency-Key": key, "Agent-Session-Id": "a b", "Agent-Step-Index": "-1"}, wire.CodeAgentSessionMalformed},
		{"session missing, step malformed", map[string]string{"Idempotency-Key": key, "Agent-Step-Index": "+1"}, wire.CodeAgentSessionMissing},
		{"session malformed, step missing", map[string]string{"Idempotency-Key": key, "Agent-Session-Id": "a:b"}, wire.CodeAgentSessionMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantContractProblem(t, h.do(callSpec{tool: "echo", args: `{}`, headers: tc.headers}), 400, tc.code, false)
		})
	}
}

// TestContractHeaderFormatBounds checks the edges of the header formats:
// session ids of visible ASCII 0x21–0x7E up to 256 characters, step
// indices 0 … 2^53−1 in plain decimal, and the quoted key form.
func TestContractHeaderFormatBounds(t *testing.T) {
	h := newHarness(t, storeEmbedded, []tools.Tool{newTestTool("echo")})
	visible := make([]byte, 0, 94)
	for c := byte(0x21); c <= 0x7e; c++ {
		if c != ':' {
			visible = append(visible, c)
		}
	}
	accepted := []struct {
		name    string
		session string
		step    uint64
	}{
		{"every visible ASCII character but ':'", string(visible), 0},
		{"session of 256 characters", strings.Repeat("s", 256), 1},
		{"largest step index", "bounds", 1<<53 - 1},
	}
	for _, tc := range accepted {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do(callSpec{tool: "echo", session: tc.session, step: tc.step, args: `{}`})
			if r.status != 200 || r.header.Get("Idempotent-Replayed") != "false" {
				t.Fatalf("%d %s", r.status, r.body)
			}
		})
	}
	key := derivedKey(t, "bounds", 5, "echo", `{}`)
	refused := []struct {
		name, session, step, code string
	}{
		{"session of 257 characters", strings.Repeat("s", 257), "5", wire.CodeAgentSessionMalformed},
		{"session with a space", "a b", "5", wire.CodeAgentSessionMalformed},
		{"session with a colon", "a:b", "5", wire.CodeAgentSessionMalformed},
		{"session with non-ASCII", "caf\u00e9", "5", wire.CodeAgentSessionMalformed},
		{"step 2^53", "bounds", "9007199254740992", wire.CodeAgentStepMalformed},
		{"step with plus sign", "bounds", "+5", wire.CodeAgentStepMalformed},
		{"step with leading zero", "bounds", "05", wire.CodeAgentStepMalformed},
		{"step as a float", "bounds", "5.0", wire.CodeAgentStepMalformed},
		{"step in exponent form", "bounds", "5e0", wire.CodeAgentStepMalformed},
		{"step beyond uint64", "bounds", "99999999999999999999", wire.CodeAgentStepMalformed},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do(callSpec{tool: "echo", args: `{}`, key: key, headers: map[string]string{"Agent-Session-Id": tc.session, "Agent-Step-Index": tc.step}})
			wantContractProblem(t, r, 400, tc.code, false)
		})
	}
	t.Run("quoted derived key is unwrapped and replays under the bare key", func(t *testing.T) {
		args := `{"q":1}`
		key := derivedKey(t, "quoted", 1, "echo", args)
		first := h.do(callSpec{tool: "echo", session: "quoted", step: 1, args: args, key: `"` + key + `"`})
		second := h.do(callSpec{tool: "echo", session: "quoted", step: 1, args: args, key: key})
		if first.status != 200 || second.header.Get("Idempotent-Replayed") != "true" ||
			second.header.Get("Tool-Execution-Id") != first.header.Get("Tool-Execution-Id") {
			t.Fatalf("quoted then bare key: %d %v / %d %v", first.status, first.header, second.status, second.header)
		}
	})
}

// TestContractIJSONEdges checks section 8's body rules: invalid UTF-8 is
// invalid_json, and integers beyond 2^53 are accepted and canonicalized as
// doubles, as RFC 8785 does (the key is computed here by hand).
func TestContractIJSONEdges(t *testing.T) {
	h := newHarness(t, storeEmbedded, []tools.Tool{newTestTool("echo")})
	for name, body := range map[string]string{
		"invalid UTF-8":            "{\"a\":\"\xff\"}",
		"overlong UTF-8":           "{\"a\":\"\xc0\xaf\"}",
		"escaped lone low surrog.": `{"a":"\udc00"}`,
		"duplicate after escaping": `{"a":1,"\u0061":2}`,
		"negative number too big":  `{"a":-1e309}`,
		"two values":               `{} {}`,
	} {
		t.Run(name, func(t *testing.T) {
			wantContractProblem(t, h.do(callSpec{tool: "echo", args: body}), 400, wire.CodeInvalidJSON, false)
		})
	}
	t.Run("integer beyond 2^53", func(t *testing.T) {
		body := `{"n":12345678901234567890}`
		key := rawKey("big", 1, "echo", `{"n":12345678901234567000}`)
		r := h.do(callSpec{tool: "echo", args: body, key: key, headers: map[string]string{"Agent-Session-Id": "big", "Agent-Step-Index": "1"}})
		if r.status != 200 {
			t.Fatalf("%d %s", r.status, r.body)
		}
	})
	t.Run("not an object", func(t *testing.T) {
		key := rawKey("arr", 1, "echo", `[1]`)
		r := h.do(callSpec{tool: "echo", args: ` [ 1 ] `, key: key, headers: map[string]string{"Agent-Session-Id": "arr", "Agent-Step-Index": "1"}})
		p := wantContractProblem(t, r, 400, wire.CodeInvalidArguments, false)
		errs, _ := p["errors"].([]any)
		if len(errs) != 1 || errs[0].(map[string]any)["location"] != "" {
			t.Fatalf("root violation must have location \"\": %s", r.body)
		}
	})
}

// TestContractSchemasDefaultToDraft2020 uses prefixItems, a 2020-12 keyword
// that earlier drafts ignore.
func TestContractSchemasDefaultToDraft2020(t *testing.T) {
	tool := newTestTool("tuple")
	tool.schema = `{"type":"object","properties":{"p":{"type":"array","prefixItems":[{"type":"integer"}]}}}`
	h := newHarness(t, storeEmbedded, []tools.Tool{tool})
	r := h.do(callSpec{tool: "tuple", session: "d", step: 1, args: `{"p":["x"]}`})
	p := wantContractProblem(t, r, 400, wire.CodeInvalidArguments, false)
	errs, _ := p["errors"].([]any)
	if len(errs) != 1 || errs[0].(map[string]any)["location"] != "/p/0" {
		t.Fatalf("want one violation at /p/0: %s", r.body)
	}
	if tool.total.Load() != 0 {
		t.Fatal("the tool ran with invalid arguments")
	}
}

// upstreamCall is one request an upstream received.
type upstreamCall struct {
	path   string
	header http.Header
	body   []byte
}

// recordingUpstream answers POST /<status> with that status, a text body and
// a content type of its own, and /ok with 201 and a vendor JSON type.
type recordingUpstream struct {
	srv   *httptest.Server
	mu    sync.Mutex
	calls []upstreamCall
}

func newRecordingUpstream(t *testing.T) *recordingUpstream {
	u := &recordingUpstream{}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.calls = append(u.calls, upstreamCall{path: r.URL.Path, header: r.Header.Clone(), body: body})
		u.mu.Unlock()
		if r.URL.Path == "/ok" {
			w.Header().Set("Content-Type", "application/vnd.up+json; v=1")
			w.WriteHeader(201)
			_, _ = w.Write([]byte(`{ "got" :` + string(body) + `}`))
			return
		}
		status, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
		w.Header().Set("Content-Type", "text/plain; charset=us-ascii")
		w.WriteHeader(status)
		_, _ = w.Write([]byte("upstream says " + strconv.Itoa(status)))
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *recordingUpstream) hits(path string) []upstreamCall {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []upstreamCall
	for _, c := range u.calls {
		if c.path == path {
			out = append(out, c)
		}
	}
	return out
}

func (u *recordingUpstream) tool(t *testing.T, name, path string) tools.Tool {
	tool, err := httptool.New(httptool.Config{Name: name, URL: u.srv.URL + path})
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

// TestContractHTTPUpstream checks section 4's upstream tool and section 8's
// byte rules: the exact request bytes and forwarded headers, the upstream's
// status, body and Content-Type on the first response and the replay, 5xx
// and 408/425/429 passed through with the execution headers and not stored.
func TestContractHTTPUpstream(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		up := newRecordingUpstream(t)
		toolset := []tools.Tool{up.tool(t, "up-ok", "/ok"), up.tool(t, "up-404", "/404")}
		for _, s := range []string{"500", "503", "408", "425", "429"} {
			toolset = append(toolset, up.tool(t, "up-"+s, "/"+s))
		}
		h := newHarness(t, kind, toolset)

		t.Run("exact bytes, forwarded headers, replay", func(t *testing.T) {
			body := "{ \"size\" :\t2.0 ,\n \"name\":\"db\" }\n"
			key := derivedKey(t, "up", 7, "up-ok", body)
			c := callSpec{tool: "up-ok", args: body, key: `"` + key + `"`,
				headers: map[string]string{"Agent-Session-Id": "up", "Agent-Step-Index": "7", "Content-Type": "application/json; charset=utf-8"}}
			first := h.do(c)
			if first.status != 201 || first.header.Get("Content-Type") != "application/vnd.up+json; v=1" ||
				string(first.body) != `{ "got" :`+body+`}` || first.header.Get("Idempotent-Replayed") != "false" {
				t.Fatalf("first: %d %v %q", first.status, first.header, first.body)
			}
			calls := up.hits("/ok")
			if len(calls) != 1 {
				t.Fatalf("upstream called %d times", len(calls))
			}
			got := calls[0]
			if string(got.body) != body {
				t.Fatalf("upstream got %q, want the client's exact bytes %q", got.body, body)
			}
			want := map[string]string{
				"Content-Type":      "application/json",
				"Idempotency-Key":   scopedKey(gateway.AnonymousTenant, "up-ok", key), // of the unwrapped key
				"Tool-Tenant":       gateway.AnonymousTenant,
				"Agent-Session-Id":  "up",
				"Agent-Step-Index":  "7",
				"Tool-Execution-Id": first.header.Get("Tool-Execution-Id"),
			}
			for name, value := range want {
				if got.header.Get(name) != value {
					t.Fatalf("upstream header %s = %q, want %q", name, got.header.Get(name), value)
				}
			}
			if fence, err := strconv.ParseInt(got.header.Get("Fencing-Token"), 10, 64); err != nil || fence <= 0 {
				t.Fatalf("Fencing-Token %q", got.header.Get("Fencing-Token"))
			}
			c.key = key
			replay := h.do(c)
			if replay.status != 201 || replay.header.Get("Content-Type") != first.header.Get("Content-Type") ||
				string(replay.body) != string(first.body) || replay.header.Get("Idempotent-Replayed") != "true" ||
				replay.header.Get("Tool-Execution-Id") != first.header.Get("Tool-Execution-Id") {
				t.Fatalf("replay differs: %d %v %q", replay.status, replay.header, replay.body)
			}
			if len(up.hits("/ok")) != 1 {
				t.Fatal("the replay reached the upstream")
			}
		})

		t.Run("404 is stored", func(t *testing.T) {
			c := callSpec{tool: "up-404", session: "up404", step: 1, args: `{}`}
			a, b := h.do(c), h.do(c)
			if a.status != 404 || b.status != 404 || b.header.Get("Idempotent-Replayed") != "true" || string(a.body) != string(b.body) ||
				b.header.Get("Content-Type") != "text/plain; charset=us-ascii" || len(up.hits("/404")) != 1 {
				t.Fatalf("404: %d/%d replayed=%q hits=%d", a.status, b.status, b.header.Get("Idempotent-Replayed"), len(up.hits("/404")))
			}
		})

		for _, s := range []string{"500", "503", "408", "425", "429"} {
			t.Run(s+" passes through and is not stored", func(t *testing.T) {
				status, _ := strconv.Atoi(s)
				c := callSpec{tool: "up-" + s, session: "up" + s, step: 1, args: `{}`}
				var ids []string
				for i := 0; i < 2; i++ {
					r := h.do(c)
					if r.status != status || string(r.body) != "upstream says "+s || r.header.Get("Content-Type") != "text/plain; charset=us-ascii" {
						t.Fatalf("attempt %d: %d %q %q", i, r.status, r.header.Get("Content-Type"), r.body)
					}
					if r.header.Get("Idempotent-Replayed") != "false" || r.header.Get("Tool-Execution-Id") == "" {
						t.Fatalf("attempt %d lacks execution headers: %v", i, r.header)
					}
					ids = append(ids, r.header.Get("Tool-Execution-Id"))
				}
				if n := len(up.hits("/" + s)); n != 2 || ids[0] == ids[1] {
					t.Fatalf("upstream ran %d times (want 2), ids %v", n, ids)
				}
				// The step is free again: another call in it is no step_conflict.
				if r := h.do(callSpec{tool: "up-404", session: "up" + s, step: 1, args: `{"other":true}`}); r.status != 404 {
					t.Fatalf("step not freed after %s: %d %s", s, r.status, r.body)
				}
			})
		}
	})
}

// TestContractReadOnlyTools checks read-only tools ignore even malformed key
// headers, store nothing, carry no execution headers and are marked in
// discovery.
func TestContractReadOnlyTools(t *testing.T) {
	lookup := newTestTool("lookup")
	lookup.readOnly = true
	h := newHarness(t, storeEmbedded, []tools.Tool{lookup, newTestTool("mutate")})
	for i := 0; i < 2; i++ {
		r := h.do(callSpec{tool: "lookup", args: `{}`, headers: map[string]string{
			"Idempotency-Key": "not a key", "Agent-Session-Id": "a:b", "Agent-Step-Index": "-1"}})
		if r.status != 200 {
			t.Fatalf("read-only call with malformed key headers: %d %s", r.status, r.body)
		}
		for _, name := range []string{"Idempotent-Replayed", "Tool-Execution-Id"} {
			if _, present := r.header[name]; present {
				t.Fatalf("read-only response carries %s", name)
			}
		}
		wantRequestID(t, r.header)
	}
	if lookup.total.Load() != 2 {
		t.Fatalf("read-only tool ran %d times, want 2", lookup.total.Load())
	}
	key := derivedKey(t, "ro", 1, "lookup", `{}`)
	h.do(callSpec{tool: "lookup", session: "ro", step: 1, args: `{}`})
	if _, err := h.store.Get(context.Background(), idempotency.Scope{Tenant: gateway.AnonymousTenant, Tool: "lookup", Key: key}); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("a read-only call stored something: %v", err)
	}

	one := h.get("/api/tools/v1/lookup", "")
	var bare map[string]any
	if err := json.Unmarshal(one.body, &bare); err != nil || bare["read_only"] != true || bare["name"] != "lookup" {
		t.Fatalf("GET one read-only tool: %s", one.body)
	}
	var list struct {
		Tools []map[string]any `json:"tools"`
	}
	if err := json.Unmarshal(h.get("/api/tools/v1", "").body, &list); err != nil || len(list.Tools) != 2 {
		t.Fatalf("list: %v %v", err, list)
	}
	for _, tool := range list.Tools {
		if ro := tool["read_only"] == true; ro != (tool["name"] == "lookup") {
			t.Fatalf("read_only marking wrong: %v", tool)
		}
	}
}

// keysOf returns the sorted member names of a JSON object.
func keysOf(t *testing.T, raw json.RawMessage) []string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("not an object: %s", raw)
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestContractDiscoveryShapes checks the three discovery documents member by
// member.
func TestContractDiscoveryShapes(t *testing.T) {
	schema := `{"type":"object","properties":{"size":{"type":"integer"}},"required":["size"]}`
	a := newTestTool("alpha")
	a.schema = schema
	h := newHarness(t, storeEmbedded, []tools.Tool{a})

	native := h.get("/api/tools/v1", "")
	if native.status != 200 || !strings.HasPrefix(native.header.Get("Content-Type"), "application/json") {
		t.Fatalf("native: %d %v", native.status, native.header)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(native.body, &doc); err != nil || len(doc) != 1 || doc["tools"] == nil {
		t.Fatalf("native document must be {\"tools\": [...]}: %s", native.body)
	}
	var list []json.RawMessage
	if err := json.Unmarshal(doc["tools"], &list); err != nil || len(list) != 1 {
		t.Fatalf("tools: %s", doc["tools"])
	}
	if got := strings.Join(keysOf(t, list[0]), ","); got != "description,input_schema,name" {
		t.Fatalf("native tool members %s", got)
	}

	one := h.get("/api/tools/v1/alpha", "")
	if one.status != 200 || string(one.body) != string(list[0]) {
		t.Fatalf("GET one must be the bare object of the list: %d %s vs %s", one.status, one.body, list[0])
	}
	var oneTool struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
	_ = json.Unmarshal(one.body, &oneTool)
	if oneTool.Name != "alpha" || oneTool.Description != "test tool alpha" || string(oneTool.InputSchema) != schema {
		t.Fatalf("one tool: %s", one.body)
	}

	openai := h.get("/api/tools/v1?format=openai", "")
	var fns []json.RawMessage
	if err := json.Unmarshal(openai.body, &fns); err != nil || len(fns) != 1 {
		t.Fatalf("openai must be a bare array: %s", openai.body)
	}
	if got := strings.Join(keysOf(t, fns[0]), ","); got != "function,type" {
		t.Fatalf("openai element members %s", got)
	}
	var fn struct {
		Type     string          `json:"type"`
		Function json.RawMessage `json:"function"`
	}
	_ = json.Unmarshal(fns[0], &fn)
	if got := strings.Join(keysOf(t, fn.Function), ","); fn.Type != "function" || got != "description,name,parameters" {
		t.Fatalf("openai function %s members %s", fn.Type, got)
	}
	var f struct {
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	}
	_ = json.Unmarshal(fn.Function, &f)
	if f.Name != "alpha" || string(f.Parameters) != schema {
		t.Fatalf("openai function: %s", fn.Function)
	}
}

// TestContractAuthCoversTheToolAPIOnly checks 401 on calls and discovery
// without a valid token (before the 404 of an unknown tool), and that
// health, readiness and metrics need none.
func TestContractAuthCoversTheToolAPIOnly(t *testing.T) {
	tool := newTestTool("echo")
	h := newHarness(t, storeEmbedded, []tools.Tool{tool}, withTenants(twoTenants))
	for _, path := range []string{"/api/tools/v1", "/api/tools/v1?format=openai", "/api/tools/v1/echo", "/api/tools/v1/no-such-tool"} {
		for _, token := range []string{"", "wrong"} {
			r := h.get(path, token)
			wantContractProblem(t, r, 401, wire.CodeUnauthorized, false)
		}
		if r := h.get(path, "tok-acme"); path != "/api/tools/v1/no-such-tool" && r.status != 200 {
			t.Fatalf("%s with a valid token: %d", path, r.status)
		}
	}
	r := h.do(callSpec{tool: "no-such-tool", session: "a", step: 1, args: `{}`})
	wantContractProblem(t, r, 401, wire.CodeUnauthorized, false)
	r = h.do(callSpec{tool: "echo", session: "a", step: 1, args: `{}`, token: "tok-globex"})
	if r.status != 200 {
		t.Fatalf("call with a valid token: %d %s", r.status, r.body)
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if r := h.get(path, ""); r.status != 200 {
			t.Fatalf("%s without a token: %d", path, r.status)
		}
	}
}

// TestContractRequestIDOnEveryResponse checks X-Request-Id is a fresh ULID
// on every kind of response, and that a client's own value is ignored.
func TestContractRequestIDOnEveryResponse(t *testing.T) {
	h := newHarness(t, storeEmbedded, []tools.Tool{newTestTool("echo")}, withAdmin("adm"))
	seen := map[string]bool{}
	check := func(what string, hdr http.Header) {
		t.Helper()
		id := wantRequestID(t, hdr)
		if seen[id] {
			t.Fatalf("%s: X-Request-Id %s reused", what, id)
		}
		seen[id] = true
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics", "/api/tools/v1", "/api/tools/v1/echo", "/api/tools/v1/nope", "/no/such/route", "/admin/v1/records/anonymous/echo/k"} {
		check(path, h.get(path, "").header)
	}
	check("405", h.send(http.MethodDelete, "/api/tools/v1/echo", "").header)
	c := callSpec{tool: "echo", session: "rid", step: 1, args: `{}`, headers: map[string]string{"X-Request-Id": "01ARZ3NDEKTSV4RRFFQ69G5FAV"}}
	check("executed", h.do(c).header)
	check("replayed", h.do(c).header)
	c.key = "bad"
	check("400", h.do(c).header)
}

// TestContractMethodNotAllowedAllowIsAccurate checks that the Allow header
// of a 405 lists the methods the resource serves — and not the one just
// refused.
func TestContractMethodNotAllowedAllowIsAccurate(t *testing.T) {
	h := newHarness(t, storeEmbedded, []tools.Tool{newTestTool("echo")})
	cases := []struct {
		method, path string
		must         []string
	}{
		{http.MethodDelete, "/api/tools/v1", []string{"GET"}},
		{http.MethodPost, "/api/tools/v1", []string{"GET"}},
		{http.MethodPut, "/api/tools/v1/echo", []string{"GET", "POST"}},
		{http.MethodPost, "/healthz", []string{"GET"}},
		{http.MethodDelete, "/metrics", []string{"GET"}},
	}
	for _, tc := range cases {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			r := h.send(tc.method, tc.path, "")
			wantContractProblem(t, r, 405, wire.CodeMethodNotAllowed, false)
			allow := map[string]bool{}
			for _, m := range strings.Split(r.header.Get("Allow"), ",") {
				allow[strings.TrimSpace(m)] = true
			}
			for _, m := range tc.must {
				if !allow[m] {
					t.Fatalf("Allow %q lacks %s", r.header.Get("Allow"), m)
				}
			}
			if allow[tc.method] {
				t.Fatalf("Allow %q lists %s, which was just refused with 405", r.header.Get("Allow"), tc.method)
			}
		})
	}
}

// TestContractMetricsSeries scrapes /metrics over HTTP and checks the two
// required series with their labels, and that an unknown tool is "unknown".
func TestContractMetricsSeries(t *testing.T) {
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

// adminGet returns the admin record JSON as raw members.
func adminRecord(t *testing.T, h *harness, path, token string) (response, map[string]json.RawMessage) {
	t.Helper()
	r := h.get(path, token)
	if r.status != 200 {
		return r, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("admin record: %v: %s", err, r.body)
	}
	return r, m
}

func rfc3339(t *testing.T, raw json.RawMessage) time.Time {
	t.Helper()
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("not a string: %s", raw)
	}
	ts, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatalf("%q is not RFC 3339: %v", s, err)
	}
	return ts
}

func mustRaw(t *testing.T, m map[string]json.RawMessage) json.RawMessage {
	t.Helper()
	if m == nil {
		t.Fatal("no admin record")
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func wantString(t *testing.T, rec map[string]json.RawMessage, member, want string) {
	t.Helper()
	var got string
	if err := json.Unmarshal(rec[member], &got); err != nil || got != want {
		t.Fatalf("record %s = %s, want %q", member, rec[member], want)
	}
}
