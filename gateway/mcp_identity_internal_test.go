package gateway

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/wire"
)

// TestMCPIdentity covers the identity rules of tools/call: _meta first,
// the headers as the fallback, a member given both ways must agree, every
// value given is format-checked, and the first bad member (key, session,
// step) decides.
func TestMCPIdentity(t *testing.T) {
	key := strings.Repeat("ab", 32)
	otherKey := strings.Repeat("cd", 32)
	cases := []struct {
		name   string
		mode   KeyMode
		meta   map[string]any
		header http.Header
		want   callHeaders
		none   bool
		code   string
	}{
		{name: "meta, integer step", meta: map[string]any{wire.MetaSessionID: "s", wire.MetaStepIndex: 7.0},
			want: callHeaders{sessionID: "s", stepIndex: 7, hasStep: true}},
		{name: "meta, string step", meta: map[string]any{wire.MetaSessionID: "s", wire.MetaStepIndex: "7"},
			want: callHeaders{sessionID: "s", stepIndex: 7, hasStep: true}},
		{name: "meta, largest step", meta: map[string]any{wire.MetaSessionID: "s", wire.MetaStepIndex: float64(1<<53 - 1)},
			want: callHeaders{sessionID: "s", stepIndex: 1<<53 - 1, hasStep: true}},
		{name: "meta with key", meta: map[string]any{wire.MetaSessionID: "s", wire.MetaStepIndex: 0.0, wire.MetaIdempotencyKey: key},
			want: callHeaders{key: key, sessionID: "s", stepIndex: 0, hasStep: true}},
		{name: "headers only", header: http.Header{"Agent-Session-Id": {"s"}, "Agent-Step-Index": {"3"}, "Idempotency-Key": {`"` + key + `"`}},
			want: callHeaders{key: key, sessionID: "s", stepIndex: 3, hasStep: true}},
		{name: "meta and headers agree", meta: map[string]any{wire.MetaSessionID: "s", wire.MetaStepIndex: 3.0},
			header: http.Header{"Agent-Session-Id": {"s"}, "Agent-Step-Index": {"3"}},
			want:   callHeaders{sessionID: "s", stepIndex: 3, hasStep: true}},
		{name: "session in meta, step in header", meta: map[string]any{wire.MetaSessionID: "s"},
			header: http.Header{"Agent-Step-Index": {"3"}},
			want:   callHeaders{sessionID: "s", stepIndex: 3, hasStep: true}},
		{name: "nothing", none: true, code: wire.CodeAgentSessionMissing},
		{name: "empty values count as missing", meta: map[string]any{wire.MetaSessionID: "", wire.MetaStepIndex: "", wire.MetaIdempotencyKey: ""},
			none: true, code: wire.CodeAgentSessionMissing},
		{name: "no step", meta: map[string]any{wire.MetaSessionID: "s"}, code: wire.CodeAgentStepMissing},
		{name: "no session", meta: map[string]any{wire.MetaStepIndex: 1.0}, code: wire.CodeAgentSessionMissing},
		{name: "step -1", meta: map[string]any{wire.MetaSessionID: "s", wire.MetaStepIndex: -1.0}, code: wire.CodeAgentStepMalformed},
		{name: "step 1.5", meta: map[string]any{wire.MetaSessionID: "s", wire.MetaStepIndex: 1.5}, code: wire.CodeAgentStepMalformed},
		{name: "step 2^53", meta: map[string]any{wire.MetaSessionID: "s", wire.MetaStepIndex: float64(1 << 53)}, code: wire.CodeAgentStepMalformed},
		{name: `step "07"`, meta: map[string]any{wire.MetaSessionID: "s", wire.MetaStepIndex: "07"}, code: wire.CodeAgentStepMalformed},
		{name: `step "-1"`, meta: map[string]any{wire.MetaSessionID: "s", wire.MetaStepIndex: "-1"}, code: wire.CodeAgentStepMalformed},
		{name: "step true", meta: map[string]any{wire.MetaSessionID: "s", wire.MetaStepIndex: true}, code: wire.CodeAgentStepMalformed},
		{name: "session with ':'", meta: map[string]any{wire.MetaSessionID: "a:b", wire.MetaStepIndex: 1.0}, code: wire.CodeAgentSessionMalformed},
		{name: "session a number", meta: map[string]any{wire.MetaSessionID: 5.0, wire.MetaStepIndex: 1.0}, code: wire.CodeAgentSessionMalformed},
		{name: "session too long", meta: map[string]any{wire.MetaSessionID: strings.Repeat("s", 257), wire.MetaStepIndex: 1.0}, code: wire.CodeAgentSessionMalformed},
		{name: "key not hex", meta: map[string]any{wire.MetaSessionID: "s", wire.MetaStepIndex: 1.0, wire.MetaIdempotencyKey: "k"}, code: wire.CodeIdempotencyKeyMalformed},
		{name: "malformed header although meta is fine", meta: map[string]any{wire.MetaSessionID: "s", wire.MetaStepIndex: 1.0},
			header: http.Header{"Agent-Step-Index": {"01"}}, code: wire.CodeAgentStepMalformed},
		{name: "session conflict", meta: map[string]any{wire.MetaSessionID: "s", wire.MetaStepIndex: 1.0},
			header: http.Header{"Agent-Session-Id": {"t"}}, code: wire.CodeIdempotencyMetadataConflict},
		{name: "step conflict", meta: map[string]any{wire.MetaSessionID: "s", wire.MetaStepIndex: 1.0},
			header: http.Header{"Agent-Step-Index": {"2"}}, code: wire.CodeIdempotencyMetadataConflict},
		{name: "key conflict", meta: map[string]any{wire.MetaSessionID: "s", wire.MetaStepIndex: 1.0, wire.MetaIdempotencyKey: key},
			header: http.Header{"Idempotency-Key": {otherKey}}, code: wire.CodeIdempotencyMetadataConflict},
		{name: "key first: malformed key beats malformed step", meta: map[string]any{wire.MetaSessionID: "s", wire.MetaStepIndex: -1.0, wire.MetaIdempotencyKey: "K"},
			code: wire.CodeIdempotencyKeyMalformed},
		{name: "opaque: key required", mode: KeyModeOpaque, meta: map[string]any{wire.MetaSessionID: "s", wire.MetaStepIndex: 1.0},
			code: wire.CodeIdempotencyKeyMissing},
		{name: "opaque: key alone", mode: KeyModeOpaque, meta: map[string]any{wire.MetaIdempotencyKey: "order-42"},
			want: callHeaders{key: "order-42"}},
		{name: "opaque: nothing", mode: KeyModeOpaque, none: true, code: wire.CodeIdempotencyKeyMissing},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mode := c.mode
			if mode == "" {
				mode = KeyModeDerived
			}
			got, none, p := mcpIdentity(c.meta, c.header, mode)
			if none != c.none {
				t.Fatalf("noIdentity = %v, want %v", none, c.none)
			}
			if c.code != "" {
				if p == nil || p.Code != c.code {
					t.Fatalf("problem %+v, want %s", p, c.code)
				}
				if p.Title == "" {
					t.Fatalf("problem %s has no title", p.Code)
				}
				return
			}
			if p != nil {
				t.Fatalf("unexpected problem %s: %s", p.Code, p.Detail)
			}
			if got != c.want {
				t.Fatalf("identity %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestMCPInputSchema(t *testing.T) {
	for raw, want := range map[string]string{
		`{"type":"object","properties":{}}`: `{"type":"object","properties":{}}`,
		`{"properties":{"a":{}}}`:           `{"type":"object","allOf":[{"properties":{"a":{}}}]}`,
		`{"type":["object","null"]}`:        `{"type":"object","allOf":[{"type":["object","null"]}]}`,
		`true`:                              `{"type":"object"}`,
		``:                                  `{"type":"object"}`,
	} {
		if got := string(mcpInputSchema([]byte(raw))); got != want {
			t.Errorf("mcpInputSchema(%s) = %s, want %s", raw, got, want)
		}
	}
}

func TestMCPInProgressWait(t *testing.T) {
	for in, want := range map[int64]int64{0: int64(DefaultMCPInProgressWait), -1: 0, 5e9: 5e9, 120e9: int64(MaxMCPInProgressWait)} {
		if got := (MCPOptions{InProgressWait: time.Duration(in)}).mcpInProgressWait(); int64(got) != want {
			t.Errorf("InProgressWait %d: effective %v, want %d", in, got, want)
		}
	}
}
