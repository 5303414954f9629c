package gatewaytest

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/wire"
)

// ResultJSON is a tool result as the client received it, as a JSON value.
func ResultJSON(t testing.TB, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	return MustJSON(t, MustMarshal(t, res))
}

// ResultText is the text of a result's one content item.
func ResultText(t testing.TB, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("result has %d content items: %+v", len(res.Content), res)
	}
	text, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content is %T, want text", res.Content[0])
	}
	return text.Text
}

// WantExecuted asserts a result of an executed (or replayed) call and
// returns its execution id.
func WantExecuted(t testing.TB, res *mcp.CallToolResult, err error, replayed bool) string {
	t.Helper()
	if err != nil {
		t.Fatalf("tools/call: %v", err)
	}
	if got := res.Meta[wire.MetaReplayed]; got != replayed {
		t.Fatalf("_meta replayed = %v, want %v: %+v", got, replayed, ResultJSON(t, res))
	}
	id, _ := res.Meta[wire.MetaExecutionID].(string)
	if len(id) != 26 {
		t.Fatalf("_meta executionId %q is not a ULID", id)
	}
	return id
}

// WantErrorMeta asserts the result's _meta "io.github.toolgateway/error".
func WantErrorMeta(t testing.TB, res *mcp.CallToolResult, code string, retryable bool) {
	t.Helper()
	got := ResultJSON(t, res)["_meta"].(map[string]any)[wire.MetaError]
	want := map[string]any{"code": code, "retryable": retryable}
	if !JSONEqual(t, MustMarshal(t, got), MustMarshal(t, want)) {
		t.Fatalf("_meta error = %v, want %v", got, want)
	}
}

// JSONEqual compares two JSON texts as values.
func JSONEqual(t testing.TB, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("json %s: %v", a, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("json %s: %v", b, err)
	}
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return bytes.Equal(ja, jb)
}

// MustMarshal encodes v as JSON.
func MustMarshal(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
