package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

func TestMethodNotAllowedListsAllowedMethods(t *testing.T) {
	h := newHarness(t, storeEmbedded, []tools.Tool{newTestTool("echo")})
	for path, want := range map[string]string{"/healthz": "GET", "/api/tools/v1": "GET", "/api/tools/v1/echo": "POST"} {
		r := h.send(http.MethodDelete, path, "")
		wantProblem(t, r, 405, wire.CodeMethodNotAllowed)
		if !strings.Contains(r.header.Get("Allow"), want) {
			t.Fatalf("%s: Allow %q lacks %s", path, r.header.Get("Allow"), want)
		}
	}
}

func TestHeadIsServedWhereGetIs(t *testing.T) {
	h := newHarness(t, storeEmbedded, []tools.Tool{newTestTool("echo")})
	for _, path := range []string{"/healthz", "/readyz", "/metrics", "/api/tools/v1", "/api/tools/v1/echo"} {
		if r := h.send(http.MethodHead, path, ""); r.status != 200 || len(r.body) != 0 {
			t.Fatalf("HEAD %s: %d (%d body bytes)", path, r.status, len(r.body))
		}
	}
}
