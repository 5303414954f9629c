package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

func TestReadOnlyToolsNeedNoKey(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		tool := newTestTool("lookup")
		tool.readOnly = true
		tool.schema = `{"type":"object","required":["id"]}`
		h := newHarness(t, kind, []tools.Tool{tool})
		for i := 0; i < 3; i++ {
			r := h.do(callSpec{tool: "lookup", args: `{"id":"x"}`})
			if r.status != 200 || r.header.Get("Idempotent-Replayed") != "" || r.header.Get("Tool-Execution-Id") != "" {
				t.Fatalf("read-only call: %d %v", r.status, r.header)
			}
		}
		if tool.total.Load() != 3 {
			t.Fatalf("read-only tool ran %d times, want every call", tool.total.Load())
		}
		wantProblem(t, h.do(callSpec{tool: "lookup", args: `{}`}), 400, wire.CodeInvalidArguments)
	})
}

// TestReadOnlyToolsIgnoreKeyHeaders checks read-only tools ignore even malformed key
// headers, store nothing, carry no execution headers and are marked in
// discovery.
func TestReadOnlyToolsIgnoreKeyHeaders(t *testing.T) {
	lookup := newTestTool("lookup")
	lookup.readOnly = true
	h := newHarness(t, storeEmbedded, []tools.Tool{lookup, newTestTool("mutate")})
	for i := 0; i < 2; i++ {
		r := h.do(callSpec{tool: "lookup", args: `{}`, headers: map[string]string{
			"Idempotency-Key": "not a key", "Agent-Session-Id": "a:b", "Agent-Step-Index": "-1"}})
		if r.status != 200 {
			t.Fatalf("read-only call with malformed key headers: %d %s", r.status, r.body)
		}
		for _, name := range []string{"Idempotent-Replayed", "Tool-Execution-Id"} {
			if _, present := r.header[name]; present {
				t.Fatalf("read-only response carries %s", name)
			}
		}
		wantRequestID(t, r.header)
	}
	if lookup.total.Load() != 2 {
		t.Fatalf("read-only tool ran %d times, want 2", lookup.total.Load())
	}
	key := derivedKey(t, "ro", 1, "lookup", `{}`)
	h.do(callSpec{tool: "lookup", session: "ro", step: 1, args: `{}`})
	if _, err := h.store.Get(context.Background(), idempotency.Scope{Tenant: callpath.AnonymousTenant, Tool: "lookup", Key: key}); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("a read-only call stored something: %v", err)
	}

	one := h.get("/api/tools/v1/lookup", "")
	var bare map[string]any
	if err := json.Unmarshal(one.body, &bare); err != nil || bare["read_only"] != true || bare["name"] != "lookup" {
		t.Fatalf("GET one read-only tool: %s", one.body)
	}
	var list struct {
		Tools []map[string]any `json:"tools"`
	}
	if err := json.Unmarshal(h.get("/api/tools/v1", "").body, &list); err != nil || len(list.Tools) != 2 {
		t.Fatalf("list: %v %v", err, list)
	}
	for _, tool := range list.Tools {
		if ro := tool["read_only"] == true; ro != (tool["name"] == "lookup") {
			t.Fatalf("read_only marking wrong: %v", tool)
		}
	}
}
