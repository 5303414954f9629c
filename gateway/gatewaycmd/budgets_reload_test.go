package gatewaycmd

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/toolgateway/toolgateway/wire"
)

// TestBudgetReload: SIGHUP applies a changed limit to the next
// reservation (what is reserved stays), and a budget removed from the
// file releases nothing: its charges stay in the store and count again
// when the budget comes back within their window. Counted at the
// upstream: what it paid out never exceeds the limit in force when each
// refund was reserved.
func TestBudgetReload(t *testing.T) {
	var paid atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var args struct{ Amount int64 }
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &args)
		paid.Add(args.Amount)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(up.Close)
	base := "listen: 127.0.0.1:0\nstore:\n  path: " + filepath.Join(t.TempDir(), "gw.db") + "\ntools:\n" +
		"  - name: refund\n    http: {url: \"" + up.URL + "\"}\n"
	charged := func(limit string) string {
		return base + "    charges:\n      - budget: refunds\n        cost: \"args.amount\"\n" +
			"budgets:\n  - {name: refunds, limit: " + limit + ", window: {calendar: day}, scope: tenant}\n"
	}
	g := startReloading(t, charged("100"))
	step := uint64(0)
	refund := func(amount string) (int, string) {
		t.Helper()
		step++
		st, _, body := callAs(t, g.addr, "", "reload-budget", step, "refund", `{"amount":`+amount+`}`)
		var p struct{ Code string }
		_ = json.Unmarshal(body, &p)
		return st, p.Code
	}
	wantPaid := func(st int, code string, want int64, what string) {
		t.Helper()
		if st != http.StatusOK || paid.Load() != want {
			t.Fatalf("%s: %d %s, upstream paid %d; want 200 and %d paid", what, st, code, paid.Load(), want)
		}
	}
	wantRefused := func(st int, code string, what string) {
		t.Helper()
		if st != http.StatusForbidden || code != wire.CodeBudgetExceeded {
			t.Fatalf("%s: %d %q; want 403 %s", what, st, code, wire.CodeBudgetExceeded)
		}
	}

	st, code := refund("60")
	wantPaid(st, code, 60, "60 of 100")
	st, code = refund("50")
	wantRefused(st, code, "50 more of 100")

	// A higher limit applies to the next reservation.
	if line := g.reload(t, charged("200")); line["msg"] != "config reloaded" {
		t.Fatalf("reload to 200: %v", line)
	}
	st, code = refund("50")
	wantPaid(st, code, 110, "50 more of 200")

	// The budget and its charge removed: calls charge nothing, and the
	// 110 reserved stays in the store.
	if line := g.reload(t, base); line["msg"] != "config reloaded" {
		t.Fatalf("reload without budgets: %v", line)
	}
	st, code = refund("500")
	wantPaid(st, code, 610, "500 with no budget")

	// Back at 100 within the same day: the 110 counts again, so even 10
	// is over.
	if line := g.reload(t, charged("100")); line["msg"] != "config reloaded" {
		t.Fatalf("reload back to 100: %v", line)
	}
	st, code = refund("10")
	wantRefused(st, code, "10 after the budget came back with 110 of 100 spent")
	if paid.Load() != 610 {
		t.Fatalf("the upstream paid %d, want 610", paid.Load())
	}
}
