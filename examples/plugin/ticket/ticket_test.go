package ticket

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/toolgateway/toolgateway/keyderive"
	"github.com/toolgateway/toolgateway/tools"
)

func TestRegisteredFromInit(t *testing.T) {
	for _, tool := range tools.Registered() {
		if tool.Spec().Name == Name {
			return
		}
	}
	t.Fatalf("%s is not in tools.Registered()", Name)
}

func TestSchemaCompilesAndRejectsBadArguments(t *testing.T) {
	registry, err := tools.NewRegistryOf(New(NewTracker()))
	if err != nil {
		t.Fatal(err)
	}
	entry, _ := registry.Lookup(Name)
	args, err := tools.DecodeArguments([]byte(`{"title": "x", "priority": "whenever"}`))
	if err != nil {
		t.Fatal(err)
	}
	got := entry.Validate(args)
	if len(got) != 2 || got[0].Location != "/priority" || got[1].Location != "/title" {
		t.Fatalf("violations = %+v, want /priority and /title", got)
	}
}

func TestOpensOnceAndRefusesAStaleOwner(t *testing.T) {
	tracker := NewTracker()
	tool := New(tracker)
	args := json.RawMessage(`{"title": "Disk full on db-1", "priority": "urgent"}`)
	call := func(token int64) (int, Ticket) {
		t.Helper()
		resp, err := tool.Call(context.Background(), &tools.Request{
			Arguments: args, Tenant: "acme", IdempotencyKey: "key-1", ScopedKey: keyderive.ScopedKey("acme", "open-ticket", "key-1"), FencingToken: token,
		})
		if err != nil {
			t.Fatal(err)
		}
		var ticket Ticket
		_ = json.Unmarshal(resp.Body, &ticket)
		return resp.Status, ticket
	}

	status, first := call(1)
	if status != 201 || first.ID != "TCK-1" {
		t.Fatalf("first call: %d %+v", status, first)
	}
	// A takeover (token 2) after the first owner's lease was lost finds the
	// ticket already opened: still one ticket.
	if status, again := call(2); status != 200 || again.ID != first.ID {
		t.Fatalf("takeover: %d %+v", status, again)
	}
	// The old owner, arriving late with token 1, is refused.
	if status, _ := call(1); status != 409 {
		t.Fatalf("stale owner: status %d, want 409", status)
	}
	if tracker.Len() != 1 {
		t.Fatalf("%d tickets opened, want 1", tracker.Len())
	}
}

func TestCancelledCallIsAnError(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := New(NewTracker()).Call(ctx, &tools.Request{Arguments: json.RawMessage(`{"title": "abc", "priority": "low"}`)})
	if err == nil {
		t.Fatal("a cancelled call succeeded")
	}
}

// Two tenants that send the same key (same session, step and arguments)
// each get their own ticket: the tool deduplicates on the tenant-scoped key.
func TestTenantsSharingAKeyGetTheirOwnTickets(t *testing.T) {
	tool := New(NewTracker())
	args := json.RawMessage(`{"title": "Disk full on db-1", "priority": "urgent"}`)
	ids := map[string]string{}
	for _, tenant := range []string{"acme", "globex"} {
		resp, err := tool.Call(context.Background(), &tools.Request{
			Arguments: args, Tenant: tenant, IdempotencyKey: "same-key",
			ScopedKey: keyderive.ScopedKey(tenant, "open-ticket", "same-key"), FencingToken: 1,
		})
		if err != nil {
			t.Fatal(err)
		}
		var ticket Ticket
		_ = json.Unmarshal(resp.Body, &ticket)
		if resp.Status != 201 {
			t.Fatalf("%s: status %d, want a ticket of its own (201): %s", tenant, resp.Status, resp.Body)
		}
		ids[tenant] = ticket.ID
	}
	if ids["acme"] == ids["globex"] {
		t.Fatalf("both tenants got ticket %s", ids["acme"])
	}
}
