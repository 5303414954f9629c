package tools

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// fakeTool is a Tool whose spec is whatever the test says.
type fakeTool struct{ spec Spec }

func (f fakeTool) Spec() Spec { return f.spec }
func (f fakeTool) Call(context.Context, *Request) (*Response, error) {
	return JSON(200, map[string]string{"tool": f.spec.Name})
}

func tool(name string, schema string) fakeTool {
	return fakeTool{spec: Spec{Name: name, Description: "the " + name + " tool", InputSchema: json.RawMessage(schema)}}
}

func TestAddRejectsInvalidNamesNamingTheTool(t *testing.T) {
	for _, name := range []string{"", "Upper", "-lead", "_lead", "has space", "slash/y", "dot.x", strings.Repeat("a", 65), "é"} {
		err := NewRegistry().Add(tool(name, ""))
		if err == nil {
			t.Errorf("Add(%q) succeeded, want an invalid-name error", name)
			continue
		}
		if !strings.Contains(err.Error(), `"`+name+`"`) || !strings.Contains(err.Error(), "invalid name") {
			t.Errorf("Add(%q) error %q does not name the tool and the problem", name, err)
		}
	}
	for _, name := range []string{"a", "0", "provision-infra", "a_b-c9", strings.Repeat("z", 64)} {
		if err := NewRegistry().Add(tool(name, "")); err != nil {
			t.Errorf("Add(%q) = %v, want success", name, err)
		}
	}
}

func TestAddRejectsDuplicateNamingTheTool(t *testing.T) {
	r := NewRegistry()
	if err := r.Add(tool("echo", "")); err != nil {
		t.Fatal(err)
	}
	err := r.Add(tool("echo", ""))
	if err == nil || !strings.Contains(err.Error(), `"echo"`) || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("second Add(echo) error = %v, want one naming the tool", err)
	}
	if r.Len() != 1 {
		t.Fatalf("Len = %d after a rejected duplicate, want 1", r.Len())
	}
}

func TestAddRejectsBadSchemaNamingTheTool(t *testing.T) {
	cases := map[string]string{
		"not json":        `{"type": "object"`,
		"bad keyword":     `{"type": "objekt"}`,
		"bad nested":      `{"type": "object", "properties": {"size": {"minimum": "one"}}}`,
		"external ref":    `{"$ref": "https://example.com/schema.json"}`,
		"file ref":        `{"$ref": "other.json"}`,
		"unknown $schema": `{"$schema": "https://example.com/my-draft", "type": "object"}`,
	}
	for what, schema := range cases {
		err := NewRegistry().Add(tool("broken-tool", schema))
		if err == nil {
			t.Errorf("%s: Add succeeded", what)
			continue
		}
		if !strings.Contains(err.Error(), `"broken-tool"`) {
			t.Errorf("%s: error %q does not name the tool", what, err)
		}
		t.Logf("%s: %v", what, err)
	}
}

func TestBadSchemaErrorSaysWhere(t *testing.T) {
	err := NewRegistry().Add(tool("sized", `{"type": "object", "properties": {"size": {"minimum": "one"}}}`))
	if err == nil || !strings.Contains(err.Error(), "/properties/size/minimum") {
		t.Fatalf("error = %v, want the location /properties/size/minimum", err)
	}
}

func TestAddOptionsOverrideTheSpec(t *testing.T) {
	r := NewRegistry()
	base := tool("wrapped", `{"type": "object", "required": ["a"]}`)
	err := r.Add(base,
		WithDescription("from config"),
		WithReadOnly(true),
		WithSchema(json.RawMessage(`{"type": "object", "required": ["b"]}`)))
	if err != nil {
		t.Fatal(err)
	}
	e, ok := r.Lookup("wrapped")
	if !ok {
		t.Fatal("Lookup(wrapped) not found")
	}
	if e.Spec.Description != "from config" || !e.Spec.ReadOnly {
		t.Fatalf("spec = %+v, want the overridden description and read_only", e.Spec)
	}
	got := e.Validate(map[string]any{"a": json.Number("1")})
	if len(got) != 1 || !strings.Contains(got[0].Message, "'b'") {
		t.Fatalf("Validate = %+v, want the overriding schema's missing 'b'", got)
	}
	// Empty overrides leave the tool's own values.
	r2 := NewRegistry()
	if err := r2.Add(base, WithDescription(""), WithSchema(nil)); err != nil {
		t.Fatal(err)
	}
	e2, _ := r2.Lookup("wrapped")
	if e2.Spec.Description != "the wrapped tool" || string(e2.Spec.InputSchema) != `{"type": "object", "required": ["a"]}` {
		t.Fatalf("spec = %+v, want the tool's own description and schema", e2.Spec)
	}
}

func TestOverridingABrokenPluginSchemaFixesIt(t *testing.T) {
	if err := NewRegistry().Add(tool("fixable", `{"type": 7}`), WithSchema(json.RawMessage(`{"type":"object"}`))); err != nil {
		t.Fatalf("Add with a valid override = %v", err)
	}
}

func TestEntriesAreSortedAndLookupFinds(t *testing.T) {
	r, err := NewRegistryOf(tool("m", ""), tool("b", ""), tool("z", ""), tool("a", ""))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range r.Entries() {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != "a,b,m,z" {
		t.Fatalf("Entries order = %v", names)
	}
	if _, ok := r.Lookup("nope"); ok {
		t.Fatal("Lookup(nope) found something")
	}
	if e, ok := r.Lookup("m"); !ok || e.Tool.Spec().Name != "m" {
		t.Fatal("Lookup(m) failed")
	}
	if e, _ := r.Lookup("a"); string(e.Spec.InputSchema) != DefaultInputSchema {
		t.Fatalf("schema of a tool without one = %s, want %s", e.Spec.InputSchema, DefaultInputSchema)
	}
}

func TestNewRegistryOfReportsTheFirstError(t *testing.T) {
	_, err := NewRegistryOf(tool("ok", ""), tool("ok", ""))
	if err == nil || !strings.Contains(err.Error(), `"ok"`) {
		t.Fatalf("err = %v", err)
	}
}
