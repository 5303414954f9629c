package tools

import (
	"encoding/json"
	"testing"
)

func discoveryRegistry(t *testing.T) *Registry {
	t.Helper()
	r := NewRegistry()
	// Added out of order: documents must come out sorted by name.
	if err := r.Add(tool("zeta", `{"type": "object", "properties": {"q": {"type": "string"}}}`)); err != nil {
		t.Fatal(err)
	}
	if err := r.Add(fakeTool{spec: Spec{Name: "alpha", Description: "reads"}}, WithReadOnly(true)); err != nil {
		t.Fatal(err)
	}
	return r
}

func marshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestNativeList(t *testing.T) {
	got := marshal(t, NativeList(discoveryRegistry(t).Entries()))
	want := `{"tools":[` +
		`{"name":"alpha","description":"reads","input_schema":{"type":"object"},"read_only":true},` +
		`{"name":"zeta","description":"the zeta tool","input_schema":{"type":"object","properties":{"q":{"type":"string"}}}}]}`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestNativeOne(t *testing.T) {
	e, _ := discoveryRegistry(t).Lookup("zeta")
	got := marshal(t, NativeOne(e))
	want := `{"name":"zeta","description":"the zeta tool","input_schema":{"type":"object","properties":{"q":{"type":"string"}}}}`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestOpenAIList(t *testing.T) {
	got := marshal(t, OpenAIList(discoveryRegistry(t).Entries()))
	want := `[` +
		`{"type":"function","function":{"name":"alpha","description":"reads","parameters":{"type":"object"}}},` +
		`{"type":"function","function":{"name":"zeta","description":"the zeta tool","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}}]`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestAnthropicList(t *testing.T) {
	got := marshal(t, AnthropicList(discoveryRegistry(t).Entries()))
	want := `[` +
		`{"name":"alpha","description":"reads","input_schema":{"type":"object"}},` +
		`{"name":"zeta","description":"the zeta tool","input_schema":{"type":"object","properties":{"q":{"type":"string"}}}}]`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestEmptyDiscoveryIsAnEmptyList(t *testing.T) {
	for name, doc := range map[string]any{
		"native":    NativeList(nil),
		"openai":    OpenAIList(nil),
		"anthropic": AnthropicList(nil),
	} {
		got := marshal(t, doc)
		if got != `{"tools":[]}` && got != `[]` {
			t.Errorf("%s: %s", name, got)
		}
	}
}

func TestHandBuiltEntryPublishesTheDefaultSchema(t *testing.T) {
	got := marshal(t, NativeOne(&Entry{Spec: Spec{Name: "bare"}}))
	if want := `{"name":"bare","description":"","input_schema":{"type":"object"}}`; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}
