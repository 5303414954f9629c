package tools

import (
	"encoding/json"
	"testing"
)

// acceptSchemas are schemas the quick check is built for (true) or must
// decline (false).
var acceptSchemas = []struct {
	raw   string
	quick bool
}{
	{`{"type":"object","properties":{"seq":{"type":"integer","minimum":0},"op":{"type":"string"},"payload":{"type":"string"}},"required":["seq","op"]}`, true},
	{provisionSchema, true},
	{`{"type":"object","properties":{"size":{"type":"integer","minimum":1,"maximum":64},"disks":{"type":"array","minItems":1,"maxItems":3,"items":{"type":"object","properties":{"gb":{"type":"integer","exclusiveMinimum":0,"exclusiveMaximum":100}}}}},"required":["size"],"additionalProperties":false}`, true},
	{`{"type":"object","properties":{"mode":{"enum":["a","b"]},"name":{"type":["string","null"],"minLength":2,"maxLength":4},"any":true,"never":false},"minProperties":1,"maxProperties":3,"additionalProperties":{"type":"boolean"}}`, true},
	{`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"n":{"type":"number","maximum":10},"list":{"items":{"type":"integer"}}}}`, true},
	{`{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"n":{"type":"integer","minimum":0,"exclusiveMinimum":true}}}`, true},
	{`{"type":"object","properties":{"price":{"type":"number","minimum":0.5}}}`, false},
	{`{"type":"object","properties":{"email":{"type":"string","format":"email"}}}`, false},
	{`{"type":"object","properties":{"id":{"type":"string","pattern":"^[a-z]+$"}}}`, true},
	{`{"type":"object","properties":{"id":{"type":"string","pattern":"b"}}}`, true},
	{`{"type":"object","$defs":{"p":{"type":"integer"}},"properties":{"p":{"$ref":"#/$defs/p"}}}`, false},
	{`{"type":"object","properties":{"n":{"enum":[1,2]}}}`, false},
	{`{"type":"object","properties":{"t":{"type":"array","prefixItems":[{"type":"string"}]}}}`, false},
	{`{"type":"object","properties":{"n":{"multipleOf":2}}}`, false},
	{`{"type":"object","anyOf":[{"required":["a"]},{"required":["b"]}]}`, false},
}

var acceptInstances = []string{
	`{}`, `{"seq":1,"op":"x"}`, `{"seq":-1,"op":"x"}`, `{"seq":1.5,"op":"x"}`, `{"seq":1.0,"op":"x"}`, `{"seq":1e2,"op":"x"}`,
	`{"seq":"1","op":"x"}`, `{"seq":12345678901234567890,"op":"x"}`, `{"seq":1,"op":null}`, `{"seq":1}`,
	`{"size":2}`, `{"size":0}`, `{"size":64}`, `{"size":65}`, `{"size":2,"extra":1}`, `{"size":2,"disks":[]}`,
	`{"size":2,"disks":[{"gb":1}]}`, `{"size":2,"disks":[{"gb":0}]}`, `{"size":2,"disks":[{"gb":100}]}`, `{"size":2,"disks":[{"gb":99},{"gb":1},{"gb":2},{"gb":3}]}`,
	`{"name":"ab"}`, `{"name":"a"}`, `{"name":"abcde"}`, `{"name":"😀😀"}`, `{"name":null}`, `{"mode":"a"}`, `{"mode":"c"}`, `{"mode":1}`,
	`{"any":[1,{"x":null}]}`, `{"never":1}`, `{"flag":true}`, `{"flag":"yes"}`, `{"a":true,"b":false,"c":true,"d":true}`,
	`{"n":10}`, `{"n":11}`, `{"n":9.5}`, `{"n":-9007199254740993}`, `{"list":[1,2,"3"]}`, `{"list":[1,2,3]}`, `{"n":0}`, `{"n":1}`,
	`{"price":0.4}`, `{"email":"x"}`, `{"id":"ABC"}`, `{"id":"abc"}`, `{"id":"xbx"}`, `{"id":""}`, `{"id":1}`, `{"p":"x"}`, `{"t":[1]}`,
	`[]`, `"x"`, `null`, `1`,
}

func TestAcceptSchemaNeverAcceptsWhatJSONSchemaRejects(t *testing.T) {
	accepted := 0
	for _, sc := range acceptSchemas {
		s, err := CompileSchema("t", json.RawMessage(sc.raw))
		if err != nil {
			t.Fatalf("compile %s: %v", sc.raw, err)
		}
		if (s.accept != nil) != sc.quick {
			t.Errorf("quick check built = %v, want %v for %s", s.accept != nil, sc.quick, sc.raw)
		}
		if s.accept == nil {
			continue
		}
		for _, text := range acceptInstances {
			v, err := DecodeArguments([]byte(text))
			if err != nil {
				t.Fatal(err)
			}
			full := s.compiled.Validate(v)
			if s.accept.accepts(v) {
				accepted++
				if full != nil {
					t.Errorf("quick check accepts %s for %s, jsonschema: %v", text, sc.raw, full)
				}
			}
		}
	}
	if accepted < 20 {
		t.Errorf("the quick check accepted only %d instances: it is not doing its job", accepted)
	}
	// The bench tool's ordinary call takes the quick path.
	s, _ := CompileSchema("t", json.RawMessage(acceptSchemas[0].raw))
	v, _ := DecodeArguments([]byte(`{"op":"bench","payload":"xxx","seq":3}`))
	if !s.accept.accepts(v) {
		t.Error("a valid ordinary call does not take the quick path")
	}
}

// FuzzAcceptSchema: whatever the arguments, the quick check accepts only
// what jsonschema accepts.
//
//	go test -run '^$' -fuzz FuzzAcceptSchema -fuzztime 20s ./tools/
func FuzzAcceptSchema(f *testing.F) {
	for i, text := range acceptInstances {
		f.Add([]byte(text), uint8(i))
	}
	compiled := make([]*Schema, 0, len(acceptSchemas))
	for _, sc := range acceptSchemas {
		s, err := CompileSchema("t", json.RawMessage(sc.raw))
		if err != nil {
			f.Fatal(err)
		}
		if s.accept != nil {
			compiled = append(compiled, s)
		}
	}
	f.Fuzz(func(t *testing.T, text []byte, which uint8) {
		v, err := DecodeArguments(text)
		if err != nil {
			return
		}
		s := compiled[int(which)%len(compiled)]
		if s.accept.accepts(v) {
			if err := s.compiled.Validate(v); err != nil {
				t.Fatalf("quick check accepts %s, jsonschema: %v", text, err)
			}
		}
	})
}
