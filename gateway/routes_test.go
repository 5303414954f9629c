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

// TestMethodNotAllowedAllowIsAccurate checks that the Allow header
// of a 405 lists the methods the resource serves — and not the one just
// refused.
func TestMethodNotAllowedAllowIsAccurate(t *testing.T) {
	h := newHarness(t, storeEmbedded, []tools.Tool{newTestTool("echo")})
	cases := []struct {
		method, path string
		must         []string
	}{
		{http.MethodDelete, "/api/tools/v1", []string{"GET"}},
		{http.MethodPost, "/api/tools/v1", []string{"GET"}},
		{http.MethodPut, "/api/tools/v1/echo", []string{"GET", "POST"}},
		{http.MethodPost, "/healthz", []string{"GET"}},
		{http.MethodDelete, "/metrics", []string{"GET"}},
	}
	for _, tc := range cases {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			r := h.send(tc.method, tc.path, "")
			wantContractProblem(t, r, 405, wire.CodeMethodNotAllowed, false)
			allow := map[string]bool{}
			for _, m := range strings.Split(r.header.Get("Allow"), ",") {
				allow[strings.TrimSpace(m)] = true
			}
			for _, m := range tc.must {
				if !allow[m] {
					t.Fatalf("Allow %q lacks %s", r.header.Get("Allow"), m)
				}
			}
			if allow[tc.method] {
				t.Fatalf("Allow %q lists %s, which was just refused with 405", r.header.Get("Allow"), tc.method)
			}
		})
	}
}
