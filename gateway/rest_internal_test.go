package gateway

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/wire"
)

// TestHotHeaderNamesAreCanonical: writeResult assigns header map entries
// directly, which is only right for names in canonical form.
func TestHotHeaderNamesAreCanonical(t *testing.T) {
	for _, name := range []string{headerContentType, headerContentLength, wire.HeaderReplayed, wire.HeaderExecutionID} {
		if canonical := http.CanonicalHeaderKey(name); canonical != name {
			t.Errorf("%q is not canonical (%q)", name, canonical)
		}
	}
}

// TestSharedHeaderValuesStayConstant: a handler or middleware that adds to
// a header written from a shared value must not change it for the next
// response.
func TestSharedHeaderValuesStayConstant(t *testing.T) {
	for _, res := range []callpath.Result{
		{Kind: callpath.ResultReplayed, Status: 200, ContentType: "application/json", Body: []byte(`{"ok":true}`), ExecutionID: "01J8ZK4Q7XKZ3V9W6T2R5M0ABC", Replayed: true},
		{Kind: callpath.ResultExecuted, Status: 201, ContentType: "application/json", Body: []byte(`{}`), ExecutionID: "01J8ZK4Q7XKZ3V9W6T2R5M0ABD"},
		{Kind: callpath.ResultReadOnly, Status: 200, ContentType: "text/plain", Body: []byte(`hi`)},
	} {
		rec := httptest.NewRecorder()
		writeResult(rec, res)
		h := rec.Header()
		h.Add(wire.HeaderReplayed, "tampered")
		h.Add("Content-Type", "tampered")
		if len(h.Values("Content-Type")) != 2 {
			t.Fatalf("Content-Type values %q", h.Values("Content-Type"))
		}
		got := rec.Result()
		if got.StatusCode != res.Status || rec.Body.String() != string(res.Body) ||
			got.Header.Get("Content-Type") != res.ContentType || got.Header.Get("Content-Length") != strconv.Itoa(len(res.Body)) {
			t.Fatalf("response %d %q %v for %+v", got.StatusCode, rec.Body, got.Header, res)
		}
		if res.ExecutionID != "" && (got.Header.Get(wire.HeaderExecutionID) != res.ExecutionID ||
			got.Header.Get(wire.HeaderReplayed) != map[bool]string{true: "true", false: "false"}[res.Replayed]) {
			t.Fatalf("execution headers %v for %+v", got.Header, res)
		}
	}
	if len(valuesTrue) != 1 || valuesTrue[0] != "true" || len(valuesFalse) != 1 || valuesFalse[0] != "false" ||
		len(valuesJSON) != 1 || valuesJSON[0] != "application/json" {
		t.Fatalf("shared values changed: %q %q %q", valuesTrue, valuesFalse, valuesJSON)
	}
}
