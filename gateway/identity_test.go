package gateway_test

// The identity headers of a call (identity.go): presence and format
// bounds, over real HTTP.

import (
	"strings"
	"testing"

	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// TestEmptyHeaderCountsAsMissing sends each key header empty.
func TestEmptyHeaderCountsAsMissing(t *testing.T) {
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

// TestHeaderFormatBounds checks the edges of the header formats:
// session ids of visible ASCII 0x21–0x7E up to 256 characters, step
// indices 0 … 2^53−1 in plain decimal, and the quoted key form.
func TestHeaderFormatBounds(t *testing.T) {
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
