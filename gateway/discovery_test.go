package gateway_test

// Discovery (discovery.go): the three catalog formats, member by member.

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"

	"github.com/toolgateway/toolgateway/tools"
)

// keysOf returns the sorted member names of a JSON object.
func keysOf(t *testing.T, raw json.RawMessage) []string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("not an object: %s", raw)
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestDiscoveryShapes checks the three discovery documents member by
// member.
func TestDiscoveryShapes(t *testing.T) {
	schema := `{"type":"object","properties":{"size":{"type":"integer"}},"required":["size"]}`
	a := newTestTool("alpha")
	a.schema = schema
	h := newHarness(t, storeEmbedded, []tools.Tool{a})

	native := h.get("/api/tools/v1", "")
	if native.status != 200 || !strings.HasPrefix(native.header.Get("Content-Type"), "application/json") {
		t.Fatalf("native: %d %v", native.status, native.header)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(native.body, &doc); err != nil || len(doc) != 1 || doc["tools"] == nil {
		t.Fatalf("native document must be {\"tools\": [...]}: %s", native.body)
	}
	var list []json.RawMessage
	if err := json.Unmarshal(doc["tools"], &list); err != nil || len(list) != 1 {
		t.Fatalf("tools: %s", doc["tools"])
	}
	if got := strings.Join(keysOf(t, list[0]), ","); got != "description,input_schema,name" {
		t.Fatalf("native tool members %s", got)
	}

	one := h.get("/api/tools/v1/alpha", "")
	if one.status != 200 || string(one.body) != string(list[0]) {
		t.Fatalf("GET one must be the bare object of the list: %d %s vs %s", one.status, one.body, list[0])
	}
	var oneTool struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
	_ = json.Unmarshal(one.body, &oneTool)
	if oneTool.Name != "alpha" || oneTool.Description != "test tool alpha" || string(oneTool.InputSchema) != schema {
		t.Fatalf("one tool: %s", one.body)
	}

	openai := h.get("/api/tools/v1?format=openai", "")
	var fns []json.RawMessage
	if err := json.Unmarshal(openai.body, &fns); err != nil || len(fns) != 1 {
		t.Fatalf("openai must be a bare array: %s", openai.body)
	}
	if got := strings.Join(keysOf(t, fns[0]), ","); got != "function,type" {
		t.Fatalf("openai element members %s", got)
	}
	var fn struct {
		Type     string          `json:"type"`
		Function json.RawMessage `json:"function"`
	}
	_ = json.Unmarshal(fns[0], &fn)
	if got := strings.Join(keysOf(t, fn.Function), ","); fn.Type != "function" || got != "description,name,parameters" {
		t.Fatalf("openai function %s members %s", fn.Type, got)
	}
	var f struct {
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	}
	_ = json.Unmarshal(fn.Function, &f)
	if f.Name != "alpha" || string(f.Parameters) != schema {
		t.Fatalf("openai function: %s", fn.Function)
	}
}
