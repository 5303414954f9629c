package gateway_test

import (
	"strings"
	"testing"

	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

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
