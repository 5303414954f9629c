package gateway_test

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// malformedCursors are cursors no store hands out, in any store's format.
var malformedCursors = []string{"!!", "bogus", "%", "\x00"}

// foreignCursors are cursors in one store's format that another may take
// as a position (the embedded store's cursor is any key, Redis's any scan
// position): never 503 from any store, and 400 from the store whose
// format they break. The PostgreSQL ones hold a NUL in a name, which the
// database refuses to compare.
var foreignCursors = map[string]storeKind{
	base64.RawURLEncoding.EncodeToString([]byte("not json")):                                                             storePostgres,
	base64.RawURLEncoding.EncodeToString([]byte(`{"c":"2026-12-01T12:00:00Z","tn":"ac\u0000me","tl":"refund","k":"k"}`)): storePostgres,
	base64.RawURLEncoding.EncodeToString([]byte(`{"c":"2026-12-01T12:00:00Z","tn":"acme","tl":"refund","k":"\u0000"}`)):  storePostgres,
	"0.99.0.":                   "",
	"0.0.18446744073709551615.": "",
	"zzzzzzzzzzzz01J":           "",
	strings.Repeat("a", 10000):  "",
}

// TestMalformedCursorIs400: every listing answers a cursor it did not
// hand out with 400 and a problem body, never 503 (the store is fine).
func TestMalformedCursorIs400(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		h := newHarness(t, kind, []tools.Tool{newTestTool("refund")}, withAdmin("adm"))
		requestApproval(t, h.store, "anonymous", "refund", "s1", 1, `{"amount":2000}`, "operator")
		cursors := map[string]bool{} // cursor → this store must refuse it
		for _, c := range malformedCursors {
			cursors[c] = true
		}
		for c, of := range foreignCursors {
			cursors[c] = of == kind
		}
		for cursor, refused := range cursors {
			for _, path := range []string{"/admin/v1/records?", "/admin/v1/approvals?", "/admin/v1/approvals?state=PENDING&"} {
				r := h.get(path+"cursor="+url.QueryEscape(cursor), "adm")
				switch {
				case r.status >= 500:
					t.Errorf("%s cursor %.40q: %d %s", path, cursor, r.status, r.body)
				case refused:
					wantProblem(t, r, http.StatusBadRequest, wire.CodeInvalidAdminRequest)
				}
			}
		}
	})
}
