package gateway_test

import (
	"reflect"
	"testing"

	"github.com/toolgateway/toolgateway/keyderive"
	"github.com/toolgateway/toolgateway/tools"
)

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
