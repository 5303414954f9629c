package gateway_test

// X-Request-Id (requestid.go): fresh on every response, errors included.

import (
	"net/http"
	"testing"

	"github.com/toolgateway/toolgateway/tools"
)

// TestRequestIDOnEveryResponse checks X-Request-Id is a fresh ULID
// on every kind of response, and that a client's own value is ignored.
func TestRequestIDOnEveryResponse(t *testing.T) {
	h := newHarness(t, storeEmbedded, []tools.Tool{newTestTool("echo")}, withAdmin("adm"))
	seen := map[string]bool{}
	check := func(what string, hdr http.Header) {
		t.Helper()
		id := wantRequestID(t, hdr)
		if seen[id] {
			t.Fatalf("%s: X-Request-Id %s reused", what, id)
		}
		seen[id] = true
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics", "/api/tools/v1", "/api/tools/v1/echo", "/api/tools/v1/nope", "/no/such/route", "/admin/v1/records/anonymous/echo/k"} {
		check(path, h.get(path, "").header)
	}
	check("405", h.send(http.MethodDelete, "/api/tools/v1/echo", "").header)
	c := callSpec{tool: "echo", session: "rid", step: 1, args: `{}`, headers: map[string]string{"X-Request-Id": "01ARZ3NDEKTSV4RRFFQ69G5FAV"}}
	check("executed", h.do(c).header)
	check("replayed", h.do(c).header)
	c.key = "bad"
	check("400", h.do(c).header)
}
