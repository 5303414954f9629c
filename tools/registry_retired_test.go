package tools

import "testing"

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
