package gatewaycmd

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/keyderive"
)

// TestBudgetHolderKilled runs the real gateway program with two refund
// tools on budgets of 100, SIGKILLs it while a refund of 60 of each runs
// at the upstream, and restarts it on the same store. The killed calls'
// 60 stay reserved: a refund of 50 is refused with 40 remaining, before
// and after their leases expire. The lease_expiry: unknown refund's
// record turns UNKNOWN and keeps its 60 held; the lease_expiry: rerun
// refund's retry takes its record over and runs it again without being
// charged twice. What the upstream paid, counted once per key (the rerun
// contract: the upstream deduplicates on the key), stays within each
// budget. The operator then resolves the UNKNOWN refund as paid: both
// budgets report 100 used, nothing held. On the embedded store, Redis and
// PostgreSQL.
func TestBudgetHolderKilled(t *testing.T) {
	bin := buildGateway(t)
	for name, storeSection := range killTestStores("budkill") {
		t.Run(name, func(t *testing.T) {
			var (
				mu   sync.Mutex
				paid = map[string]map[string]float64{} // by tool path: amount by Idempotency-Key
				hang = make(chan struct{})
			)
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var args struct{ Amount float64 }
				body, _ := io.ReadAll(r.Body)
				_ = json.Unmarshal(body, &args)
				mu.Lock()
				if paid[r.URL.Path] == nil {
					paid[r.URL.Path] = map[string]float64{}
				}
				_, again := paid[r.URL.Path][r.Header.Get("Idempotency-Key")]
				paid[r.URL.Path][r.Header.Get("Idempotency-Key")] = args.Amount
				mu.Unlock()
				if args.Amount == 60 && !again { // the first run of the 60: its gateway dies first
					select {
					case <-hang:
					case <-r.Context().Done():
					}
					return
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"ok":true}`))
			}))
			t.Cleanup(func() { close(hang); up.Close() })
			addr, dir := freeAddr(t), t.TempDir()
			config := filepath.Join(dir, "gateway.yaml")
			tool := func(name, expiry, budget string) string {
				return "  - name: " + name + "\n    http:\n      url: " + up.URL + "/" + name + "\n    lease_expiry: " + expiry +
					"\n    charges:\n      - budget: " + budget + "\n        cost: \"args.amount\"\n"
			}
			yaml := "listen: " + addr + "\n" + storeSection(t) + "admin:\n  token_sha256: " + tokenHash(budgetAdmin) + "\nidempotency:\n  lock_ttl: 3s\ntools:\n" +
				tool("refund-unknown", "unknown", "u") + tool("refund-rerun", "rerun", "r") +
				"budgets:\n  - {name: u, limit: 100, window: {rolling: 24h}, scope: tenant}\n" +
				"  - {name: r, limit: 100, window: {calendar: day}, scope: tenant}\n"
			if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			first := startReplica(t, bin, config, addr)
			if r := budgetCall(t, addr, "refund-unknown", "probe", `{"amount":0}`); r.status != http.StatusOK {
				t.Fatalf("probe: %d %s", r.status, r.body)
			}
			for _, tool := range []string{"refund-unknown", "refund-rerun"} {
				go func() { // answered by nobody: killed
					if r := budgetCall(t, addr, tool, "holder", `{"amount":60}`); r.status != 0 {
						t.Errorf("%s: the killed call answered %d %s", tool, r.status, r.body)
					}
				}()
			}
			waitFor(t, func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(paid["/refund-unknown"]) == 2 && len(paid["/refund-rerun"]) == 1
			})
			first.kill()
			startReplica(t, bin, config, addr)

			exceeded := func(tool, session string) {
				t.Helper()
				r := budgetCall(t, addr, tool, session, `{"amount":50}`)
				var p struct {
					Code      string
					Remaining float64
				}
				_ = json.Unmarshal(r.body, &p)
				if r.status != http.StatusForbidden || p.Code != "budget_exceeded" || p.Remaining != 40 {
					t.Fatalf("%s: 50 while the killed 60 is held: %d %s", tool, r.status, r.body)
				}
			}
			exceeded("refund-unknown", "a")
			exceeded("refund-rerun", "a")
			// Once the dead leases expire: UNKNOWN stays held; the rerun
			// takes over and runs again, charged once.
			deadline := time.Now().Add(30 * time.Second)
			for {
				r := budgetCall(t, addr, "refund-unknown", "holder", `{"amount":60}`)
				if r.problemCode() == "outcome_unknown" {
					break
				}
				if r.problemCode() != "request_in_progress" || time.Now().After(deadline) {
					t.Fatalf("the killed unknown refund's retry: %d %s", r.status, r.body)
				}
				time.Sleep(200 * time.Millisecond)
			}
			for {
				r := budgetCall(t, addr, "refund-rerun", "holder", `{"amount":60}`)
				if r.status == http.StatusOK {
					break
				}
				if r.problemCode() != "request_in_progress" || time.Now().After(deadline) {
					t.Fatalf("the killed rerun refund's retry: %d %s", r.status, r.body)
				}
				time.Sleep(200 * time.Millisecond)
			}
			exceeded("refund-unknown", "b")
			exceeded("refund-rerun", "b")
			for _, tool := range []string{"refund-unknown", "refund-rerun"} {
				if r := budgetCall(t, addr, tool, "c", `{"amount":40}`); r.status != http.StatusOK {
					t.Fatalf("%s: the 40 left: %d %s", tool, r.status, r.body)
				}
			}
			// The operator finds the UNKNOWN refund paid and resolves it so:
			// its 60 is committed, nothing held any more.
			key, _ := keyderive.Key("refund-unknown-holder", 0, "refund-unknown", []byte(`{"amount":60}`))
			req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/admin/v1/records/anonymous/refund-unknown/"+key+"/resolve",
				strings.NewReader(`{"status":200,"body":{"ok":true}}`))
			req.Header.Set("Authorization", "Bearer "+budgetAdmin)
			req.Header.Set("Content-Type", "application/json")
			if r := do(t, req); r.status != http.StatusOK {
				t.Fatalf("resolve the UNKNOWN refund: %d %s", r.status, r.body)
			}
			req, _ = http.NewRequest(http.MethodGet, "http://"+addr+"/admin/v1/budgets?tenant=anonymous", nil)
			req.Header.Set("Authorization", "Bearer "+budgetAdmin)
			r := do(t, req)
			var usage struct{ Budgets []gateway.AdminBudget }
			if err := json.Unmarshal(r.body, &usage); err != nil || len(usage.Budgets) != 2 {
				t.Fatalf("admin budgets: %d %s", r.status, r.body)
			}
			for _, b := range usage.Budgets {
				if b.Used != 100 || b.Held != 0 || b.Remaining != 0 {
					t.Errorf("budget %s after the settling: %+v, want 100 used, nothing held", b.Budget, b)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for path, byKey := range paid {
				sum := 0.0
				for _, amount := range byKey {
					sum += amount
				}
				if sum != 100 {
					t.Errorf("%s: the upstream paid %v (per key), want the budget's 100", path, sum)
				}
			}
		})
	}
}

// budgetAdmin is the admin token of TestBudgetHolderKilled.
const budgetAdmin = "budget-kill-admin"

// budgetCall calls tool at step 0 of the tool's own session named
// session, answering at once.
func budgetCall(t *testing.T, addr, tool, session, args string) reply {
	t.Helper()
	return quickCall(t, addr, tool+"-"+session, 0, tool, args)
}
