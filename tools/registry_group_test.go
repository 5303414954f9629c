package tools

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

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
