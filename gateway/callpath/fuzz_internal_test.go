package callpath

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/toolgateway/toolgateway/keyderive"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// headerCodes are the problem codes the key headers can produce.
var headerCodes = map[string]bool{
	wire.CodeIdempotencyKeyMissing: true, wire.CodeIdempotencyKeyMalformed: true,
	wire.CodeAgentSessionMissing: true, wire.CodeAgentSessionMalformed: true,
	wire.CodeAgentStepMissing: true, wire.CodeAgentStepMalformed: true,
}

// FuzzCallHeaders feeds arbitrary header values (CR, LF, NUL, quotes,
// non-ASCII, huge numbers) to the header parsers and checks: no panic; a
// refusal is a 400 with a key-header code; and whatever is accepted is safe
// to put into a store key or a log line (visible ASCII only), in range, and
// exactly what the client sent (after sf-string unquoting).
//
//	go test -run '^$' -fuzz '^FuzzCallHeaders$' -fuzztime 20s ./gateway/
func FuzzCallHeaders(f *testing.F) {
	key := strings.Repeat("ab", 32)
	f.Add(key, "sess-1", "7", "wait=5", false, false)
	f.Add(`"`+key+`"`, "s", "0", "respond-async, wait=100", false, false)
	f.Add(`"a\"b\\c"`, "", "", "wait=\"3\"", true, false)
	f.Add("order-1", "s:1", "01", "WAIT = 2; x", true, false)
	f.Add(key+"\r\nX: y", "s\x00", "9007199254740991", "wait=-1", false, true)
	f.Add("", "é", "9007199254740992", "wait=99999999999999999999", true, true)
	f.Fuzz(func(t *testing.T, key, session, step, prefer string, opaque, duplicateKey bool) {
		h := http.Header{}
		for name, v := range map[string]string{wire.HeaderIdempotencyKey: key, wire.HeaderSessionID: session, wire.HeaderStepIndex: step, "Prefer": prefer} {
			if v != "" {
				h[name] = []string{v}
			}
		}
		if duplicateKey {
			h[wire.HeaderIdempotencyKey] = append(h[wire.HeaderIdempotencyKey], key)
		}
		mode := KeyModeDerived
		if opaque {
			mode = KeyModeOpaque
		}

		parsed := parseIdentity(identitySource{api: APIREST, header: h}, mode)
		got, p := parsed.id, parsed.problem
		if p != nil {
			if p.Status != http.StatusBadRequest || !headerCodes[p.Code] {
				t.Fatalf("refusal %d %s", p.Status, p.Code)
			}
		} else {
			if duplicateKey {
				t.Fatal("two Idempotency-Key headers accepted")
			}
			if !validKey(got.Key, mode) || !visibleASCII(got.Key) {
				t.Fatalf("accepted key %q", got.Key)
			}
			if unquoted, ok := unquoteKey(key); !ok || unquoted != got.Key {
				t.Fatalf("key %q became %q", key, got.Key)
			}
			if mode == KeyModeDerived && !got.HasStep {
				t.Fatal("derived mode accepted a call without session and step")
			}
			if got.HasStep {
				if got.SessionID != session || keyderive.ValidateSessionID(session) != nil || !visibleASCII(session) || strings.Contains(session, ":") {
					t.Fatalf("accepted session %q as %q", session, got.SessionID)
				}
				if strconv.FormatUint(got.StepIndex, 10) != step || got.StepIndex > keyderive.MaxStepIndex {
					t.Fatalf("accepted step %q as %d", step, got.StepIndex)
				}
			}
		}

		sdk, err := keyderive.ParseStepIndex(step)
		// Read-only calls pass only well-formed Agent-* headers to the tool.
		if s, i, has := parsed.sessionID, parsed.stepIndex, parsed.hasStep; has {
			if s != session || keyderive.ValidateSessionID(s) != nil || i != sdk || err != nil {
				t.Fatalf("read-only step headers (%q, %d) from (%q, %q)", s, i, session, step)
			}
		}
		if w := preferWait(h, MaxPreferWait); w < 0 || w > MaxPreferWait {
			t.Fatalf("Prefer %q gave wait=%d", prefer, w)
		}
	})
}

func visibleASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return s != ""
}

// fuzzTool is a tool with a schema that exercises many keywords.
type fuzzTool struct{}

func (fuzzTool) Spec() tools.Spec {
	return tools.Spec{Name: "provision", Description: "fuzz", InputSchema: json.RawMessage(`{
		"type": "object",
		"properties": {
			"size": {"type": "integer", "minimum": 1, "maximum": 9007199254740991, "multipleOf": 1},
			"ratio": {"type": "number", "exclusiveMinimum": 0, "multipleOf": 0.01},
			"name": {"type": "string", "minLength": 1, "maxLength": 64, "pattern": "^[a-z][a-z0-9-]*$"},
			"region": {"enum": ["eu", "us", "ap"]},
			"tags": {"type": "array", "maxItems": 8, "uniqueItems": true, "items": {"type": "string"}},
			"disks": {"type": "array", "items": {"$ref": "#/$defs/disk"}},
			"meta": {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean", "null"]}, "maxProperties": 4}
		},
		"required": ["size"],
		"additionalProperties": false,
		"$defs": {"disk": {"type": "object", "properties": {"gb": {"type": "integer"}, "kind": {"const": "ssd"}}, "required": ["gb"]}}
	}`)}
}

func (fuzzTool) Call(context.Context, *tools.Request) (*tools.Response, error) {
	return nil, errors.New("not called")
}

// FuzzDecodeArguments runs the gateway's argument path on any body: I-JSON
// decoding, JCS, key derivation and schema validation. It checks: no panic;
// a rejection wraps keyderive.ErrInvalidJSON; the canonical form is a fixed
// point with the same key; and a schema refusal is a 400 problem whose
// violations point into the arguments and which marshals to JSON.
//
//	go test -run '^$' -fuzz '^FuzzDecodeArguments$' -fuzztime 20s ./gateway/
func FuzzDecodeArguments(f *testing.F) {
	registry := tools.NewRegistry()
	if err := registry.Add(fuzzTool{}); err != nil {
		f.Fatal(err)
	}
	entry, _ := registry.Lookup("provision")
	for _, seed := range []string{
		`{"size":1}`,
		`{"size":1.0,"ratio":0.07,"name":"db-1","region":"eu","tags":["a","b"],"disks":[{"gb":10,"kind":"ssd"}],"meta":{"k":null}}`,
		`{"size":0,"ratio":-1,"name":"X","region":"mars","tags":["a","a"],"disks":[{"kind":"hdd"}],"meta":{"a":1,"b":2,"c":3,"d":4,"e":5},"extra":true}`,
		`{"size":12345678901234567890123}`,
		`{"size":1e400}`,
		`{"size":1,"name":"\ud800"}`,
		`{"size":1,"size":2}`,
		`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]`,
		"\xef\xbb\xbf{}",
		`{"size":NaN}`,
		`{"name":"\u0000\u001f\"\\/","size":-0}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		value, canonical, err := keyderive.Decode(body)
		if err != nil {
			if !errors.Is(err, keyderive.ErrInvalidJSON) {
				t.Fatalf("rejection %v does not wrap ErrInvalidJSON", err)
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("accepted %q, which encoding/json rejects", body)
		}
		again, canonicalAgain, err := keyderive.Decode(canonical)
		if err != nil || string(canonicalAgain) != string(canonical) {
			t.Fatalf("canonical %q is not a fixed point: %q, %v", canonical, canonicalAgain, err)
		}
		if _, isObject := value.(map[string]any); !isObject {
			if _, stillObject := again.(map[string]any); stillObject {
				t.Fatal("canonicalization turned a non-object into an object")
			}
			if p := validateArguments(entry, treeArguments(value)); p == nil || p.Code != wire.CodeInvalidArguments {
				t.Fatalf("non-object %q passed the schema step", body)
			}
			return
		}
		k1, err1 := keyderive.KeyFromCanonical("s", 1, "provision", canonical)
		k2, err2 := keyderive.Key("s", 1, "provision", body)
		if err1 != nil || err2 != nil || k1 != k2 {
			t.Fatalf("keys differ: %s %v / %s %v", k1, err1, k2, err2)
		}
		p := validateArguments(entry, treeArguments(value))
		if p == nil {
			return
		}
		if p.Status != http.StatusBadRequest || p.Code != wire.CodeInvalidArguments || len(p.Errors) == 0 {
			t.Fatalf("schema refusal %d %s with %d errors", p.Status, p.Code, len(p.Errors))
		}
		for _, v := range p.Errors {
			if (v.Location != "" && !strings.HasPrefix(v.Location, "/")) || v.Message == "" {
				t.Fatalf("violation %+v", v)
			}
		}
		if _, err := json.Marshal(p); err != nil {
			t.Fatalf("problem does not marshal: %v", err)
		}
	})
}
