package tools

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/toolgateway/toolgateway/schemas"
)

const provisionSchema = `{
  "type": "object",
  "properties": {
    "name":  {"type": "string", "minLength": 1},
    "cpus":  {"type": "integer", "minimum": 1},
    "disks": {"type": "array", "items": {
      "type": "object",
      "properties": {"size": {"type": "integer", "minimum": 1}},
      "required": ["size"]
    }},
    "tags": {"type": "object", "additionalProperties": {"type": "string"}}
  },
  "required": ["name", "cpus"],
  "additionalProperties": false
}`

func mustCompile(t *testing.T, schema string) *Schema {
	t.Helper()
	s, err := CompileSchema("t", json.RawMessage(schema))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func validateText(t *testing.T, s *Schema, args string) []Violation {
	t.Helper()
	got, err := s.ValidateJSON([]byte(args))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func locations(vs []Violation) []string {
	out := []string{}
	for _, v := range vs {
		out = append(out, v.Location)
	}
	return out
}

func TestValidArgumentsHaveNoViolations(t *testing.T) {
	s := mustCompile(t, provisionSchema)
	if got := validateText(t, s, `{"name": "db", "cpus": 2, "disks": [{"size": 10}], "tags": {"team": "x"}}`); got != nil {
		t.Fatalf("violations = %+v, want nil", got)
	}
}

func TestEveryViolationIsReportedWithItsLocation(t *testing.T) {
	s := mustCompile(t, provisionSchema)
	got := validateText(t, s, `{"cpus": 0, "disks": [{"size": 5}, {"size": "big"}, {}], "tags": {"a~b/c": 1}, "extra": true}`)
	wantLocations := []string{"", "", "/cpus", "/disks/1/size", "/disks/2", "/tags/a~0b~1c"}
	if !reflect.DeepEqual(locations(got), wantLocations) {
		t.Fatalf("locations = %q, want %q\n%+v", locations(got), wantLocations, got)
	}
	byLocation := map[string]string{}
	for _, v := range got {
		byLocation[v.Location] += v.Message + "|"
		if v.Message == "" {
			t.Errorf("empty message at %q", v.Location)
		}
	}
	for location, want := range map[string]string{
		"":              "'name'",  // missing required
		"/cpus":         ">= 1",    // minimum
		"/disks/1/size": "integer", // type
		"/disks/2":      "'size'",  // missing required in an item
	} {
		if !strings.Contains(byLocation[location], want) {
			t.Errorf("message at %q = %q, want it to mention %s", location, byLocation[location], want)
		}
	}
	if !strings.Contains(byLocation[""], "extra") {
		t.Errorf("root messages %q do not mention the additional property", byLocation[""])
	}
}

func TestViolationsSerializeAsTheContractSays(t *testing.T) {
	s := mustCompile(t, provisionSchema)
	got := validateText(t, s, `{"name": "x", "cpus": "two"}`)
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), `[{"location":"/cpus","message":"`) {
		t.Fatalf("JSON = %s", b)
	}
}

func TestNonObjectArgumentsAreOneRootViolation(t *testing.T) {
	s := mustCompile(t, `{}`) // accepts anything, yet arguments are objects
	for _, args := range []string{`[]`, `"x"`, `1`, `null`, `true`} {
		got := validateText(t, s, args)
		if len(got) != 1 || got[0].Location != "" || !strings.Contains(got[0].Message, "JSON object") {
			t.Errorf("%s: violations = %+v, want one root violation", args, got)
		}
	}
}

func TestLargeIntegersKeepPrecision(t *testing.T) {
	s := mustCompile(t, `{"type": "object", "properties": {"n": {"type": "integer", "maximum": 9007199254740993}}}`)
	// 9007199254740993 and ...994 are the same float64; as json.Number they differ.
	if got := validateText(t, s, `{"n": 9007199254740993}`); got != nil {
		t.Fatalf("at the maximum: %+v", got)
	}
	if got := validateText(t, s, `{"n": 9007199254740994}`); len(got) != 1 || got[0].Location != "/n" {
		t.Fatalf("above the maximum: %+v", got)
	}
}

func TestDraft07IsHonouredWhenDeclared(t *testing.T) {
	// Array-form "items" (tuple validation) exists in draft-07 only; 2020-12
	// calls it prefixItems and requires "items" to be a schema.
	tuple := `"type": "object", "properties": {"pair": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]}}`
	if _, err := CompileSchema("default-draft", json.RawMessage(`{`+tuple+`}`)); err == nil {
		t.Fatal("array-form items compiled under the default draft (2020-12)")
	}
	s := mustCompile(t, `{"$schema": "http://json-schema.org/draft-07/schema#", `+tuple+`}`)
	if got := validateText(t, s, `{"pair": ["a", 1]}`); got != nil {
		t.Fatalf("valid tuple: %+v", got)
	}
	got := validateText(t, s, `{"pair": [1, "a"]}`)
	if want := []string{"/pair/0", "/pair/1"}; !reflect.DeepEqual(locations(got), want) {
		t.Fatalf("locations = %q, want %q", locations(got), want)
	}
}

func TestDefaultDraftIs202012(t *testing.T) {
	s := mustCompile(t, `{"type": "object", "properties": {"pair": {"prefixItems": [{"type": "string"}], "items": false}}}`)
	if got := validateText(t, s, `{"pair": ["a", "b"]}`); len(got) != 1 || got[0].Location != "/pair/1" {
		t.Fatalf("prefixItems/items:false not applied: %+v", got)
	}
}

func TestFormatsAreAsserted(t *testing.T) {
	s := mustCompile(t, `{"type": "object", "properties": {"mail": {"type": "string", "format": "email"}}}`)
	if got := validateText(t, s, `{"mail": "not an address"}`); len(got) != 1 || got[0].Location != "/mail" {
		t.Fatalf("violations = %+v, want the bad email", got)
	}
}

func TestEmptySchemaMeansAnyObject(t *testing.T) {
	s, err := CompileSchema("none", nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(s.Raw()) != DefaultInputSchema {
		t.Fatalf("Raw = %s", s.Raw())
	}
	if got := validateText(t, s, `{"anything": [1, 2]}`); got != nil {
		t.Fatalf("violations = %+v", got)
	}
}

func TestLocalRefsWork(t *testing.T) {
	s := mustCompile(t, `{"type": "object", "$defs": {"pos": {"type": "integer", "minimum": 1}},
		"properties": {"a": {"$ref": "#/$defs/pos"}, "b": {"$ref": "#/$defs/pos"}}}`)
	got := validateText(t, s, `{"a": 0, "b": -1}`)
	if want := []string{"/a", "/b"}; !reflect.DeepEqual(locations(got), want) {
		t.Fatalf("locations = %q, want %q", locations(got), want)
	}
}

func TestValidateJSONRejectsNonJSON(t *testing.T) {
	s := mustCompile(t, `{}`)
	for _, text := range []string{`{`, `{} {}`, ``} {
		if _, err := s.ValidateJSON([]byte(text)); err == nil {
			t.Errorf("ValidateJSON(%q) did not fail", text)
		}
	}
}

func TestHandBuiltEntryOnlyRequiresAnObject(t *testing.T) {
	e := &Entry{Spec: Spec{Name: "manual"}}
	if got := e.Validate(map[string]any{}); got != nil {
		t.Fatalf("object: %+v", got)
	}
	if got := e.Validate([]any{}); len(got) != 1 {
		t.Fatalf("array: %+v", got)
	}
}

func TestAcceptsAnyObject(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want bool
	}{
		{"", true}, {DefaultInputSchema, true}, {" {} ", true}, {"true", true},
		{`{"type":"object","required":["a"]}`, false},
		{`{"type":"object","properties":{"a":{"type":"string"}}}`, false},
		{`{"type": "object"}`, false}, // other spellings are validated as written
	} {
		s, err := CompileSchema("t", json.RawMessage(tc.raw))
		if err != nil {
			t.Fatalf("compile %q: %v", tc.raw, err)
		}
		if got := s.AcceptsAnyObject(); got != tc.want {
			t.Errorf("AcceptsAnyObject(%q) = %v, want %v", tc.raw, got, tc.want)
		}
		// Whatever it says, a schema that claims to accept any object must.
		if s.AcceptsAnyObject() && validateText(t, s, `{"x":[1,{"y":null}]}`) != nil {
			t.Errorf("%q claims to accept any object but rejects one", tc.raw)
		}
	}
	var none *Schema
	if !none.AcceptsAnyObject() {
		t.Error("a nil Schema validates only that the arguments are an object")
	}
}

// BenchmarkValidate measures the per-request schema check on arguments
// already decoded (the gateway decodes once, in keyderive.Decode), with the
// schema compiled once at start-up, as the gateway does.
func BenchmarkValidate(b *testing.B) {
	provision, err := schemas.Load("provision-infra")
	if err != nil {
		b.Fatal(err)
	}
	cases := []struct {
		name, schema, args string
	}{
		{"small", `{"type":"object","properties":{"seq":{"type":"integer","minimum":0},"op":{"type":"string"},"payload":{"type":"string"}},"required":["seq","op"]}`,
			`{"op":"bench","payload":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx","seq":42}`},
		{"provision-infra", string(provision),
			`{"name":"web-1","region":"eu-west-1","cpus":4,"memory_gb":16,"disks":[{"size":100,"type":"ssd"},{"size":500,"type":"hdd"}]}`},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			schema, err := CompileSchema("bench", []byte(c.schema))
			if err != nil {
				b.Fatal(err)
			}
			args, err := DecodeArguments([]byte(c.args))
			if err != nil {
				b.Fatal(err)
			}
			if v := schema.Validate(args); v != nil {
				b.Fatalf("arguments invalid: %v", v)
			}
			b.ReportAllocs()
			for b.Loop() {
				if v := schema.Validate(args); v != nil {
					b.Fatal(v)
				}
			}
		})
	}
}
