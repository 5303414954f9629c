package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
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

// originTool is a tool that says where it comes from, like an MCP server's.
type originTool struct {
	fakeTool
	origin string
}

func (o originTool) Provenance() string { return o.origin }

// waitingTool stands in for a tool whose upstream is not listed yet.
type waitingTool struct{ fakeTool }

func (waitingTool) Available() error { return fmt.Errorf("upstream x: %w", ErrUpstreamUnavailable) }
func (waitingTool) Call(context.Context, *Request) (*Response, error) {
	return nil, fmt.Errorf("upstream x: %w", ErrUpstreamUnavailable)
}

func TestSetGroupReplacesOnlyItsOwnEntries(t *testing.T) {
	r := NewRegistry()
	if err := r.Add(tool("echo", "")); err != nil {
		t.Fatal(err)
	}
	if err := r.SetGroup("mcp:a", Group{Tools: []Tool{tool("a_one", ""), tool("a_two", "")}}); err != nil {
		t.Fatal(err)
	}
	if err := r.SetGroup("mcp:b", Group{Tools: []Tool{tool("b_one", "")}}); err != nil {
		t.Fatal(err)
	}
	if err := r.SetGroup("mcp:a", Group{Tools: []Tool{tool("a_three", "")}}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range r.Entries() {
		names = append(names, e.Name())
	}
	if got, want := strings.Join(names, ","), "a_three,b_one,echo"; got != want {
		t.Fatalf("entries = %s, want %s", got, want)
	}
	if _, ok := r.Lookup("a_one"); ok {
		t.Fatal("a_one still found after its group was replaced")
	}
	if err := r.SetGroup("mcp:a", Group{}); err != nil {
		t.Fatal(err)
	}
	if r.Len() != 2 {
		t.Fatalf("Len = %d after removing group a, want 2", r.Len())
	}
}

func TestSetGroupClashNamesBothSidesAndKeepsTheRest(t *testing.T) {
	r := NewRegistry()
	if err := r.Add(tool("create_ticket", "")); err != nil {
		t.Fatal(err)
	}
	if err := r.SetGroup("mcp:other", Group{Tools: []Tool{originTool{tool("get_ticket", ""), `MCP server "other", tool "get_ticket"`}}}); err != nil {
		t.Fatal(err)
	}
	err := r.SetGroup("mcp:tickets", Group{Tools: []Tool{
		originTool{tool("create_ticket", ""), `MCP server "tickets", tool "create_ticket"`},
		originTool{tool("get_ticket", ""), `MCP server "tickets", tool "get_ticket"`},
		originTool{tool("close_ticket", ""), `MCP server "tickets", tool "close_ticket"`},
		originTool{tool("Bad Name", ""), `MCP server "tickets", tool "Bad Name"`},
	}})
	if err == nil {
		t.Fatal("SetGroup with clashes succeeded")
	}
	msg := err.Error()
	for _, want := range []string{
		`MCP server "tickets", tool "create_ticket" clashes with tool "create_ticket"`,
		`MCP server "tickets", tool "get_ticket" clashes with MCP server "other", tool "get_ticket"`,
		`MCP server "tickets", tool "Bad Name"`,
		"invalid name",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if e, ok := r.Lookup("close_ticket"); !ok || e.group != "mcp:tickets" {
		t.Fatal("the tool without a clash was not installed")
	}
	if e, _ := r.Lookup("get_ticket"); e.group != "mcp:other" {
		t.Fatal("a clash replaced the other group's tool")
	}
	if err := r.Add(tool("close_ticket", "")); err == nil || !strings.Contains(err.Error(), `MCP server "tickets", tool "close_ticket"`) {
		t.Fatalf("Add over a group's tool: error %v, want one naming the group's tool", err)
	}
}

func TestCatchAllAnswersUnknownNamesUnderItsPrefix(t *testing.T) {
	r := NewRegistry()
	err := r.SetGroup("mcp:t", Group{
		Tools:          []Tool{waitingTool{tool("t_create", "")}},
		CatchAllPrefix: "t_",
		CatchAll:       func(name string) Tool { return waitingTool{tool(name, "")} },
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Len() != 0 {
		t.Fatalf("stand-ins are published: Len = %d", r.Len())
	}
	for _, name := range []string{"t_create", "t_anything"} {
		e, ok := r.Lookup(name)
		if !ok {
			t.Fatalf("Lookup(%s) not found", name)
		}
		if e.Name() != name || !errors.Is(e.Available(), ErrUpstreamUnavailable) {
			t.Fatalf("Lookup(%s) = %q, available %v", name, e.Name(), e.Available())
		}
		if v := e.Validate(map[string]any{"x": 1.0}); v != nil {
			t.Fatalf("stand-in validation: %v", v)
		}
	}
	if _, ok := r.Lookup("other"); ok {
		t.Fatal("a name outside the prefix was caught")
	}
	if _, ok := r.Lookup("t_Bad"); ok {
		t.Fatal("an invalid name was caught")
	}
	// Listing replaces the stand-ins and drops the catch-all.
	if err := r.SetGroup("mcp:t", Group{Tools: []Tool{tool("t_create", "")}}); err != nil {
		t.Fatal(err)
	}
	if e, _ := r.Lookup("t_create"); e.Available() != nil {
		t.Fatal("listed tool still unavailable")
	}
	if _, ok := r.Lookup("t_anything"); ok {
		t.Fatal("catch-all still answers after listing")
	}
}

// TestRegistryUnderConcurrentLookupsAndUpdates runs lookups, listings and
// group replacements at once (run with -race): every lookup of the static
// tool succeeds, and a group's tools are seen all together or not at all.
func TestRegistryUnderConcurrentLookupsAndUpdates(t *testing.T) {
	r := NewRegistry()
	if err := r.Add(tool("echo", "")); err != nil {
		t.Fatal(err)
	}
	const generations = 200
	var stop atomic.Bool
	var failures atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if _, ok := r.Lookup("echo"); !ok {
					failures.Add(1)
				}
				entries := r.Entries()
				// Group g's two tools are g_a and g_b of one generation.
				var gens []string
				for _, e := range entries {
					if strings.HasPrefix(e.Name(), "g_") {
						gens = append(gens, e.Spec.Description)
					}
				}
				if len(gens) != 0 && (len(gens) != 2 || gens[0] != gens[1]) {
					failures.Add(1)
				}
				_, _ = r.Lookup("g_a")
			}
		}()
	}
	for i := 0; i < generations; i++ {
		gen := fmt.Sprint(i)
		a, b := tool("g_a", ""), tool("g_b", "")
		a.spec.Description, b.spec.Description = gen, gen
		if i%10 == 9 {
			if err := r.SetGroup("mcp:g", Group{}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := r.SetGroup("mcp:g", Group{Tools: []Tool{a, b}}); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	if n := failures.Load(); n != 0 {
		t.Fatalf("%d lookups saw a missing static tool or half a group", n)
	}
}

// ReplaceAdded swaps the Add entries for another registry's and keeps the
// groups'; a clash with a group's tool changes nothing.
func TestReplaceAddedKeepsGroupsAndRefusesClashes(t *testing.T) {
	r := NewRegistry()
	if err := r.Add(tool("old", "")); err != nil {
		t.Fatal(err)
	}
	if err := r.SetGroup("srv", Group{Tools: []Tool{tool("srv-a", "")}}); err != nil {
		t.Fatal(err)
	}
	next := NewRegistry()
	if err := next.Add(tool("new", ""), WithDescription("the new one")); err != nil {
		t.Fatal(err)
	}
	if err := r.ReplaceAdded(next); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Lookup("old"); ok {
		t.Fatal("old: still registered after the replace")
	}
	if e, ok := r.Lookup("new"); !ok || e.Spec.Description != "the new one" {
		t.Fatalf("new: %v %v", e, ok)
	}
	if _, ok := r.Lookup("srv-a"); !ok {
		t.Fatal("srv-a: the group's tool was dropped")
	}

	clash := NewRegistry()
	if err := clash.Add(tool("srv-a", "")); err != nil {
		t.Fatal(err)
	}
	if err := clash.Add(tool("other", "")); err != nil {
		t.Fatal(err)
	}
	err := r.ReplaceAdded(clash)
	if err == nil || !strings.Contains(err.Error(), `"srv-a"`) {
		t.Fatalf("clash: err = %v", err)
	}
	if _, ok := r.Lookup("new"); !ok {
		t.Fatal("a refused replace changed the registry")
	}
	if _, ok := r.Lookup("other"); ok {
		t.Fatal("a refused replace added a tool")
	}
}

// TestRetiredKeepsTheLastMutatingEntry: a group's mutating tool that is
// removed, or re-listed read-only, is retired with its last mutating entry;
// one listed mutating again is not; read-only tools and stand-ins never are.
func TestRetiredKeepsTheLastMutatingEntry(t *testing.T) {
	readOnly := func(name string) Tool {
		f := tool(name, "")
		f.spec.ReadOnly = true
		return f
	}
	r := NewRegistry()
	if err := r.SetGroup("mcp:a", Group{Tools: []Tool{waitingTool{tool("a_wait", "")}}}); err != nil {
		t.Fatal(err)
	}
	if err := r.SetGroup("mcp:a", Group{Tools: []Tool{tool("a_create", ""), tool("a_update", ""), readOnly("a_get")}}); err != nil {
		t.Fatal(err)
	}
	first, _ := r.Lookup("a_create")
	for _, name := range []string{"a_create", "a_update", "a_get", "a_wait"} {
		if _, ok := r.Retired(name); ok {
			t.Fatalf("%s retired before any change (a stand-in or a listed tool)", name)
		}
	}
	// a_create removed, a_update re-listed read-only, a_get removed.
	if err := r.SetGroup("mcp:a", Group{Tools: []Tool{readOnly("a_update")}}); err != nil {
		t.Fatal(err)
	}
	if e, ok := r.Retired("a_create"); !ok || e != first {
		t.Fatalf("removed a_create: retired %v %v, want its last entry", e, ok)
	}
	if e, ok := r.Retired("a_update"); !ok || e.Spec.ReadOnly {
		t.Fatalf("a_update re-listed read-only: retired %+v %v, want the mutating entry", e, ok)
	}
	if _, ok := r.Retired("a_get"); ok {
		t.Fatal("a read-only tool was retired: it has no records")
	}
	// Another group's change keeps a's retired entries.
	if err := r.SetGroup("mcp:b", Group{Tools: []Tool{tool("b_one", "")}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Retired("a_create"); !ok {
		t.Fatal("another group's change dropped a retired entry")
	}
	// a_create listed mutating again: not retired any more.
	if err := r.SetGroup("mcp:a", Group{Tools: []Tool{tool("a_create", ""), readOnly("a_update")}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Retired("a_create"); ok {
		t.Fatal("a tool offered as mutating again is still retired")
	}
	if _, ok := r.Retired("a_update"); !ok {
		t.Fatal("a_update, still read-only, is no longer retired")
	}
}
