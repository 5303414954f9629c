package callpath

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/toolgateway/toolgateway/tools"
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
		want   Identity
		none   bool
		code   string
	}{
		{name: "meta, integer step", meta: map[string]any{wire.MetaSessionID: "s", wire.MetaStepIndex: 7.0},
			want: Identity{SessionID: "s", StepIndex: 7, HasStep: true}},
		{name: "meta, string step", meta: map[string]any{wire.MetaSessionID: "s", wire.MetaStepIndex: "7"},
			want: Identity{SessionID: "s", StepIndex: 7, HasStep: true}},
		{name: "meta, largest step", meta: map[string]any{wire.MetaSessionID: "s", wire.MetaStepIndex: float64(1<<53 - 1)},
			want: Identity{SessionID: "s", StepIndex: 1<<53 - 1, HasStep: true}},
		{name: "meta with key", meta: map[string]any{wire.MetaSessionID: "s", wire.MetaStepIndex: 0.0, wire.MetaIdempotencyKey: key},
			want: Identity{Key: key, SessionID: "s", StepIndex: 0, HasStep: true}},
		{name: "headers only", header: http.Header{"Agent-Session-Id": {"s"}, "Agent-Step-Index": {"3"}, "Idempotency-Key": {`"` + key + `"`}},
			want: Identity{Key: key, SessionID: "s", StepIndex: 3, HasStep: true}},
		{name: "meta and headers agree", meta: map[string]any{wire.MetaSessionID: "s", wire.MetaStepIndex: 3.0},
			header: http.Header{"Agent-Session-Id": {"s"}, "Agent-Step-Index": {"3"}},
			want:   Identity{SessionID: "s", StepIndex: 3, HasStep: true}},
		{name: "session in meta, step in header", meta: map[string]any{wire.MetaSessionID: "s"},
			header: http.Header{"Agent-Step-Index": {"3"}},
			want:   Identity{SessionID: "s", StepIndex: 3, HasStep: true}},
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
			want: Identity{Key: "order-42"}},
		{name: "opaque: nothing", mode: KeyModeOpaque, none: true, code: wire.CodeIdempotencyKeyMissing},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mode := c.mode
			if mode == "" {
				mode = KeyModeDerived
			}
			parsed := parseIdentity(identitySource{api: APIMCP, header: c.header, meta: rawMetaOf(t, c.meta)}, mode)
			got, none, p := parsed.id, parsed.none, parsed.problem
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

// rawMetaOf encodes a decoded _meta map member by member, as a client
// would send it.
func rawMetaOf(t *testing.T, meta map[string]any) map[string]json.RawMessage {
	t.Helper()
	if meta == nil {
		return nil
	}
	raw := make(map[string]json.RawMessage, len(meta))
	for name, v := range meta {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		raw[name] = b
	}
	return raw
}

// TestIdentityStrictStepIndex: a _meta step index is a JSON integer
// literal or a decimal string; a number with a fraction or an exponent is
// malformed even when it equals an integer (contract section 9, strict
// envelope).
func TestIdentityStrictStepIndex(t *testing.T) {
	for raw, ok := range map[string]bool{`3`: true, `"3"`: true, `0`: true, `9007199254740991`: true,
		`3.0`: false, `3.5`: false, `3e0`: false, `-0`: false, `9007199254740992`: false, `null`: false} {
		meta := map[string]json.RawMessage{wire.MetaSessionID: json.RawMessage(`"s"`), wire.MetaStepIndex: json.RawMessage(raw)}
		parsed := parseIdentity(identitySource{api: APIMCP, meta: meta}, KeyModeDerived)
		if ok != (parsed.problem == nil) || (!ok && parsed.problem.Code != wire.CodeAgentStepMalformed) {
			t.Errorf("stepIndex %s: problem %+v, want ok=%v", raw, parsed.problem, ok)
		}
	}
}

// TestIdentityReadOnlySameOnBothDoors: a read-only tool is handed a
// well-formed session and step whatever else is wrong (a malformed key),
// over REST and MCP alike; a malformed step hands nothing.
func TestIdentityReadOnlySameOnBothDoors(t *testing.T) {
	entry := &tools.Entry{Spec: tools.Spec{Name: "lookup", ReadOnly: true}}
	for _, c := range []struct {
		name   string
		header http.Header
		want   Identity
	}{
		{"bad key beside a good step", http.Header{"Idempotency-Key": {"K"}, "Agent-Session-Id": {"s"}, "Agent-Step-Index": {"4"}},
			Identity{SessionID: "s", StepIndex: 4, HasStep: true}},
		{"malformed step", http.Header{"Agent-Session-Id": {"s"}, "Agent-Step-Index": {"04"}}, Identity{}},
		{"session alone", http.Header{"Agent-Session-Id": {"s"}}, Identity{}},
	} {
		for _, api := range []API{APIREST, APIMCP} {
			call := &Call{Entry: entry}
			parseIdentity(identitySource{api: api, header: c.header}, KeyModeDerived).applyTo(call)
			if call.Identity != c.want || call.IdentityProblem != nil {
				t.Errorf("%s over %s: identity %+v, problem %v; want %+v", c.name, api, call.Identity, call.IdentityProblem, c.want)
			}
		}
	}
}

// TestHostCallIDs: a call with none of the gateway's identity is keyed on
// the host's id of the call the MCP door read (its members, their order
// and their checks: mcpserver's TestHostCallIDMembers); any gateway member
// wins; a host member the door refused is refused; the key is the
// contract's hash.
func TestHostCallIDs(t *testing.T) {
	parse := func(host HostCall, header http.Header) parsedIdentity {
		return parseIdentity(identitySource{api: APIMCP, header: header, hostCall: host}, KeyModeDerived)
	}
	got := parse(HostCall{Meta: "claudecode/toolUseId", ID: "toolu_01"}, nil)
	if got.problem != nil || got.none || got.id != (Identity{HostMeta: "claudecode/toolUseId", HostCallID: "toolu_01"}) {
		t.Fatalf("claude code id: %+v", got)
	}
	if got := parse(HostCall{Meta: "claudecode/toolUseId", ID: "toolu_01"}, http.Header{"Agent-Session-Id": {"s"}}); got.id.HostMeta != "" || got.problem == nil || got.problem.Code != wire.CodeAgentStepMissing {
		t.Fatalf("a gateway member beside a host id: %+v", got)
	}
	malformed := NewProblem(wire.CodeIdempotencyKeyMalformed, "not a string")
	if got := parse(HostCall{Problem: malformed}, nil); got.problem == nil || got.problem.Code != wire.CodeIdempotencyKeyMalformed {
		t.Fatalf("a number as host id: %+v", got)
	}
	if got := parse(HostCall{}, nil); !got.none {
		t.Fatalf("no host id keyed a call: %+v", got)
	}
	sum := sha256.Sum256([]byte(`claudecode/toolUseId:toolu_01:ship:{"a":1}`))
	if key := hostCallKey("claudecode/toolUseId", "toolu_01", "ship", []byte(`{"a":1}`)); key != hex.EncodeToString(sum[:]) {
		t.Fatalf("host key %s", key)
	}
}
