package gateway_test

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/keyderive"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// TestChecksInOrder sends bad requests and checks each gets the contract's
// status and code, that the first failing check in the contract's order wins,
// and that nothing ran or was stored.
func TestChecksInOrder(t *testing.T) {
	tool := newTestTool("provision")
	tool.schema = `{"type":"object","properties":{"size":{"type":"integer","minimum":1},"disks":{"type":"array","items":{"type":"object","properties":{"gb":{"type":"integer"}}}}},"required":["size"],"additionalProperties":false}`
	h := newHarness(t, storeEmbedded, []tools.Tool{tool}, withMaxBody(256))
	good := `{"size":2}`
	key := derivedKey(t, "s", 1, "provision", good)
	arrayKey, err := keyderive.KeyFromCanonical("s", 1, "provision", []byte(`[1,2]`))
	if err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name   string
		c      callSpec
		ctype  string
		status int
		code   string
	}{
		{"unknown tool", callSpec{tool: "nope", session: "s", step: 1, args: good}, "", 404, wire.CodeToolNotFound},
		{"tool name with bad characters", callSpec{tool: "Provision", session: "s", step: 1, args: good}, "", 404, wire.CodeToolNotFound},
		{"unknown tool beats bad method", callSpec{tool: "nope", method: http.MethodPut}, "", 404, wire.CodeToolNotFound},
		{"method", callSpec{tool: "provision", method: http.MethodPut, args: good}, "", 405, wire.CodeMethodNotAllowed},
		{"content type missing", callSpec{tool: "provision", session: "s", step: 1, args: good}, "-", 415, wire.CodeUnsupportedMediaType},
		{"content type text", callSpec{tool: "provision", session: "s", step: 1, args: good}, "text/plain", 415, wire.CodeUnsupportedMediaType},
		{"too large beats bad json", callSpec{tool: "provision", session: "s", step: 1, args: `{"a":"` + strings.Repeat("x", 300) + `"`}, "", 413, wire.CodePayloadTooLarge},
		{"bad json beats missing key", callSpec{tool: "provision", args: `{"size":`}, "", 400, wire.CodeInvalidJSON},
		{"duplicate member", callSpec{tool: "provision", session: "s", step: 1, args: `{"size":1,"size":2}`}, "", 400, wire.CodeInvalidJSON},
		{"lone surrogate", callSpec{tool: "provision", session: "s", step: 1, args: `{"size":1,"n":"\ud800"}`}, "", 400, wire.CodeInvalidJSON},
		{"number out of range", callSpec{tool: "provision", session: "s", step: 1, args: `{"size":1e400}`}, "", 400, wire.CodeInvalidJSON},
		{"not an object, key headers right", callSpec{tool: "provision", args: `[1,2]`, key: arrayKey, headers: map[string]string{"Agent-Session-Id": "s", "Agent-Step-Index": "1"}}, "", 400, wire.CodeInvalidArguments},
		{"not an object, key missing", callSpec{tool: "provision", args: `[1,2]`}, "", 400, wire.CodeIdempotencyKeyMissing},
		{"key missing", callSpec{tool: "provision", args: good}, "", 400, wire.CodeIdempotencyKeyMissing},
		{"key malformed beats session missing", callSpec{tool: "provision", args: good, key: "ABC"}, "", 400, wire.CodeIdempotencyKeyMalformed},
		{"key uppercase hex", callSpec{tool: "provision", args: good, key: strings.ToUpper(key), headers: map[string]string{"Agent-Session-Id": "s", "Agent-Step-Index": "1"}}, "", 400, wire.CodeIdempotencyKeyMalformed},
		{"session missing", callSpec{tool: "provision", args: good, key: key, headers: map[string]string{"Agent-Step-Index": "1"}}, "", 400, wire.CodeAgentSessionMissing},
		{"session malformed", callSpec{tool: "provision", args: good, key: key, headers: map[string]string{"Agent-Session-Id": "a:b", "Agent-Step-Index": "1"}}, "", 400, wire.CodeAgentSessionMalformed},
		{"session malformed beats step missing", callSpec{tool: "provision", args: good, key: key, headers: map[string]string{"Agent-Session-Id": "a b"}}, "", 400, wire.CodeAgentSessionMalformed},
		{"step missing", callSpec{tool: "provision", args: good, key: key, headers: map[string]string{"Agent-Session-Id": "s"}}, "", 400, wire.CodeAgentStepMissing},
		{"step leading zero", callSpec{tool: "provision", args: good, key: key, headers: map[string]string{"Agent-Session-Id": "s", "Agent-Step-Index": "01"}}, "", 400, wire.CodeAgentStepMalformed},
		{"step negative", callSpec{tool: "provision", args: good, key: key, headers: map[string]string{"Agent-Session-Id": "s", "Agent-Step-Index": "-1"}}, "", 400, wire.CodeAgentStepMalformed},
		{"step too large", callSpec{tool: "provision", args: good, key: key, headers: map[string]string{"Agent-Session-Id": "s", "Agent-Step-Index": "9007199254740992"}}, "", 400, wire.CodeAgentStepMalformed},
		{"key mismatch beats schema", callSpec{tool: "provision", session: "s", step: 2, args: `{"size":0}`, key: key}, "", 422, wire.CodeIdempotencyKeyMismatch},
		{"schema", callSpec{tool: "provision", session: "s", step: 1, args: `{"size":0,"disks":[{"gb":1},{"gb":"x"}],"extra":true}`}, "", 400, wire.CodeInvalidArguments},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.ctype != "" {
				if tc.c.headers == nil {
					tc.c.headers = map[string]string{}
				}
				if tc.ctype == "-" {
					tc.c.omit = append(tc.c.omit, "Content-Type")
				} else {
					tc.c.headers["Content-Type"] = tc.ctype
				}
			}
			r := h.do(tc.c)
			p := wantProblem(t, r, tc.status, tc.code)
			if p["retryable"] != false {
				t.Fatalf("%s must not be retryable", tc.code)
			}
			if tc.status == 405 && r.header.Get("Allow") == "" {
				t.Fatal("405 without Allow")
			}
			if r.header.Get("Idempotent-Replayed") != "" {
				t.Fatal("a refused request must not look executed")
			}
		})
	}
	if tool.total.Load() != 0 {
		t.Fatalf("the tool ran %d times for bad requests", tool.total.Load())
	}
	// Nothing was stored: the good call now runs normally, in step 1.
	if r := h.do(callSpec{tool: "provision", session: "s", step: 1, args: good}); r.status != 200 || r.header.Get("Idempotent-Replayed") != "false" {
		t.Fatalf("good call after bad ones: %d %s", r.status, r.body)
	}
}

func TestSchemaViolationsListEveryLocation(t *testing.T) {
	tool := newTestTool("provision")
	tool.schema = `{"type":"object","properties":{"size":{"type":"integer","minimum":1},"disks":{"type":"array","items":{"type":"object","properties":{"gb":{"type":"integer"}}}}},"required":["size"]}`
	h := newHarness(t, storeEmbedded, []tools.Tool{tool})
	r := h.do(callSpec{tool: "provision", session: "s", step: 1, args: `{"size":0,"disks":[{"gb":1},{"gb":"x"}]}`})
	p := wantProblem(t, r, 400, wire.CodeInvalidArguments)
	errs, _ := p["errors"].([]any)
	locations := map[string]bool{}
	for _, e := range errs {
		m := e.(map[string]any)
		locations[m["location"].(string)] = true
		if m["message"] == "" {
			t.Fatalf("violation without message: %v", m)
		}
	}
	if !locations["/size"] || !locations["/disks/1/gb"] {
		t.Fatalf("locations %v, want /size and /disks/1/gb", locations)
	}
}

func TestHeadersAreParsedStrictly(t *testing.T) {
	tool := newTestTool("echo")
	h := newHarness(t, storeEmbedded, []tools.Tool{tool})
	args := `{"a":1}`
	key := derivedKey(t, "s", 7, "echo", args)
	// A quoted key is unwrapped.
	r := h.do(callSpec{tool: "echo", args: args, key: `"` + key + `"`, headers: map[string]string{"Agent-Session-Id": "s", "Agent-Step-Index": "7"}})
	if r.status != 200 {
		t.Fatalf("quoted key: %d %s", r.status, r.body)
	}
	// Two Idempotency-Key headers are refused.
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/api/tools/v1/echo", strings.NewReader(args))
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Add("Idempotency-Key", key)
	req.Header.Add("Idempotency-Key", key)
	req.Header.Set("Agent-Session-Id", "s")
	req.Header.Set("Agent-Step-Index", "7")
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("two keys: %d", resp.StatusCode)
	}
	// The gateway mints X-Request-Id itself.
	r = h.do(callSpec{tool: "echo", session: "s", step: 8, args: args, headers: map[string]string{"X-Request-Id": "client-chosen"}})
	if r.header.Get("X-Request-Id") == "client-chosen" || len(r.header.Get("X-Request-Id")) != 26 {
		t.Fatalf("X-Request-Id %q", r.header.Get("X-Request-Id"))
	}
}

// A 422 idempotency_key_mismatch says which key the gateway derived and
// from which canonical text, so a client whose own canonicalisation
// differs (json.dumps(sort_keys=True) keeps 1.0 and escapes é) sees at a
// glance which bytes differ.
func TestKeyMismatchShowsExpectedKeyAndCanonicalArguments(t *testing.T) {
	h := newHarness(t, storeEmbedded, []tools.Tool{newTestTool("provision")})
	args := `{"size": 1.0, "name": "caf\u00e9"}`
	pythonCanonical := `{"name": "caf\u00e9", "size": 1.0}` // what a Python client hashed
	wrong := derivedKey(t, "s", 1, "provision", `{"other":true}`)
	r := h.do(callSpec{tool: "provision", session: "s", step: 1, args: args, key: wrong})
	p := wantProblem(t, r, 422, wire.CodeIdempotencyKeyMismatch)
	if got, want := p["expected_key"], derivedKey(t, "s", 1, "provision", args); got != want {
		t.Fatalf("expected_key = %v, want %s", got, want)
	}
	canonical, _ := p["canonical_arguments"].(string)
	if canonical != `{"name":"café","size":1}` {
		t.Fatalf("canonical_arguments = %q", canonical)
	}
	if canonical == pythonCanonical {
		t.Fatal("the difference should be visible")
	}
	if strings.Contains(string(r.body), wrong) {
		t.Fatal("the problem echoes the client's wrong key")
	}
}

// The schema judges the canonical values the key is derived from: 1e-400
// is 0 under JCS, so {"delay_ms":0} and {"delay_ms":1e-400} are one call
// and get one answer, replayed, never a 400 for one spelling of it.
func TestSchemaJudgesCanonicalValues(t *testing.T) {
	tool := newTestTool("sleep")
	tool.schema = `{"type":"object","properties":{"delay_ms":{"type":"integer","minimum":0}},"required":["delay_ms"]}`
	h := newHarness(t, storeEmbedded, []tools.Tool{tool})
	zero := `{"delay_ms":0}`
	underflow := `{"delay_ms":1e-400}`
	key := derivedKey(t, "s", 1, "sleep", zero)
	if derivedKey(t, "s", 1, "sleep", underflow) != key {
		t.Fatal("the two spellings should derive one key")
	}
	first := h.do(callSpec{tool: "sleep", session: "s", step: 1, args: zero})
	if first.status != 200 {
		t.Fatalf("first: %d %s", first.status, first.body)
	}
	for range 2 {
		again := h.do(callSpec{tool: "sleep", session: "s", step: 1, args: underflow})
		if again.status != 200 || again.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("the other spelling: %d %s", again.status, again.body)
		}
	}
	// Alone (a fresh step), the underflowing spelling is valid too.
	fresh := h.do(callSpec{tool: "sleep", session: "s", step: 2, args: underflow})
	if fresh.status != 200 {
		t.Fatalf("fresh 1e-400: %d %s", fresh.status, fresh.body)
	}
}

// A form-encoded body sent as application/json is told it is not JSON,
// not given a tokenizer's message about literals.
func TestFormBodyIsNotJSON(t *testing.T) {
	h := newHarness(t, storeEmbedded, []tools.Tool{newTestTool("provision")})
	r := h.do(callSpec{tool: "provision", session: "s", step: 1, args: "region=eu&size=2", key: strings.Repeat("a", 64)})
	p := wantProblem(t, r, 400, wire.CodeInvalidJSON)
	detail, _ := p["detail"].(string)
	if !strings.HasPrefix(detail, "the body is not JSON") {
		t.Fatalf("detail = %q", detail)
	}
}

// The identity problem a door found is reported after the JSON checks, in
// the contract's order; an unkeyed call runs unprotected only where the
// door allows it, and every time.
func TestCallPathIdentityOrderAndUnkeyed(t *testing.T) {
	tool := newTestTool("provision")
	h := newHarness(t, storeEmbedded, []tools.Tool{tool})
	entry, _ := h.tools.Lookup("provision")
	missing := &callpath.Problem{Code: wire.CodeAgentSessionMissing, Status: 400}
	call := func(args string, allow bool) callpath.Result {
		return h.gw.Call(context.Background(), &callpath.Call{
			API: callpath.APIMCP, Tenant: callpath.AnonymousTenant, Entry: entry, Arguments: []byte(args),
			IdentityProblem: missing, NoIdentity: true, AllowUnkeyed: allow,
		})
	}
	if res := call(`{"a":`, false); res.Problem == nil || res.Problem.Code != wire.CodeInvalidJSON {
		t.Fatalf("bad JSON and no identity: %+v, want invalid_json first", res)
	}
	if res := call(`{}`, false); res.Kind != callpath.ResultProblem || res.Problem != missing {
		t.Fatalf("no identity: %+v, want the door's problem", res)
	}
	for range 2 {
		if res := call(`{}`, true); res.Kind != callpath.ResultUnkeyed || res.ExecutionID != "" || res.Status != 200 {
			t.Fatalf("allowed unkeyed call: %+v", res)
		}
	}
	if runs := tool.total.Load(); runs != 2 {
		t.Fatalf("unkeyed calls ran %d times, want every time (2)", runs)
	}
	if !strings.Contains(string(h.get("/metrics", "").body), `api="mcp"`) {
		t.Fatal("no api=\"mcp\" series")
	}
}

// TestSchemalessToolAnswersLikeAnAnyObjectSchema: a tool without a schema
// is checked without a value tree (only "is an object"), and must answer
// every body exactly as a tool whose schema accepts any object but is
// validated through the tree: same status, code, detail and errors.
func TestSchemalessToolAnswersLikeAnAnyObjectSchema(t *testing.T) {
	plain := newTestTool("plain")
	typed := newTestTool("typed")
	typed.schema = `{"type":"object","properties":{}}`
	h := newHarness(t, storeEmbedded, []tools.Tool{plain, typed})
	bodies := []string{
		`{"a":1}`, `{ "b" : 1, "a" : [1.50, "\u0041"] }`, `[1,2]`, `"x"`, `null`, `12`,
		`{"a":1,"a":2}`, `{"a":1e400}`, `{"a":"\ud800"}`, `{"size":`, "{\"a\":\"\xff\"}", `{"a":1} x`,
	}
	for step, body := range bodies {
		var answers [2]response
		for i, tool := range []string{"plain", "typed"} {
			c := callSpec{tool: tool, session: "s-" + tool, step: uint64(step), args: body}
			if canonical, err := keyderive.Canonicalize([]byte(body)); err == nil && canonical[0] != '{' {
				// Key of a valid non-object: the key check passes, then the
				// schema step refuses it.
				key, err := keyderive.KeyFromCanonical("s-"+tool, uint64(step), tool, canonical)
				if err != nil {
					t.Fatal(err)
				}
				c.key = key
			}
			answers[i] = h.do(c)
		}
		if answers[0].status != answers[1].status {
			t.Fatalf("%q: status %d without a schema, %d with: %s / %s", body, answers[0].status, answers[1].status, answers[0].body, answers[1].body)
		}
		if answers[0].status == 200 {
			continue
		}
		p0, p1 := answers[0].problem(t), answers[1].problem(t)
		for _, field := range []string{"status", "code", "detail", "errors"} {
			if !reflect.DeepEqual(p0[field], p1[field]) {
				t.Errorf("%q: %s = %v without a schema, %v with", body, field, p0[field], p1[field])
			}
		}
		if p0["code"] == "invalid_arguments" && p0["errors"] == nil {
			t.Errorf("%q: invalid_arguments without errors: %s", body, answers[0].body)
		}
	}
	if plain.total.Load() != 2 || typed.total.Load() != 2 {
		t.Fatalf("runs: %d without a schema, %d with; want 2 each (the two objects)", plain.total.Load(), typed.total.Load())
	}
}

// TestFirstBadKeyHeaderWins checks the order Idempotency-Key,
// Agent-Session-Id, Agent-Step-Index when several are bad.
func TestFirstBadKeyHeaderWins(t *testing.T) {
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

// TestIJSONEdges checks section 8's body rules: invalid UTF-8 is
// invalid_json, and integers beyond 2^53 are accepted and canonicalized as
// doubles, as RFC 8785 does (the key is computed here by hand).
func TestIJSONEdges(t *testing.T) {
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

// TestSchemasDefaultToDraft2020 uses prefixItems, a 2020-12 keyword
// that earlier drafts ignore.
func TestSchemasDefaultToDraft2020(t *testing.T) {
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
