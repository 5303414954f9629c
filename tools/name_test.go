package tools

import (
	"strings"
	"testing"
)

// TestReservedNameIsRefused: no tool may take the name the gateway's own
// approval endpoints live under, whether added, brought by a group (an MCP
// server) or answered by a group's catch-all; other names pass.
func TestReservedNameIsRefused(t *testing.T) {
	r := NewRegistry()
	err := r.Add(tool(ReservedName, ""))
	if err == nil || !strings.Contains(err.Error(), `tool "approvals"`) || !strings.Contains(err.Error(), "reserved") {
		t.Fatalf("Add(%s) = %v, want an error naming the reserved tool", ReservedName, err)
	}
	err = r.SetGroup("upstream", Group{
		Tools:    []Tool{tool(ReservedName, ""), tool("refund", "")},
		CatchAll: func(name string) Tool { return tool(name, "") },
	})
	if err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Fatalf("SetGroup with %s = %v, want a reserved-name error", ReservedName, err)
	}
	if _, ok := r.Lookup("refund"); !ok {
		t.Fatal("the group's other tool was not installed")
	}
	if e, ok := r.Lookup(ReservedName); ok {
		t.Fatalf("Lookup(%s) = %v: a catch-all answered the reserved name", ReservedName, e.Spec.Name)
	}
	if _, ok := r.Lookup("approvals2"); !ok {
		t.Fatal("the catch-all no longer answers other names")
	}
	if err := CheckReserved("approval"); err != nil {
		t.Fatalf("CheckReserved(approval) = %v", err)
	}
}
