package gatewaycmd

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestEffectKeyHolderKilledMidCall runs the real gateway program with a
// refund tool (effect_key on txn_id, lease_expiry: unknown), SIGKILLs it
// while the refund runs at the upstream, and restarts it on the same
// store. The same refund from other sessions never runs it again: in
// progress while the dead holder's lease lives, then outcome_unknown; with
// another amount, effect_conflict naming the UNKNOWN holder. The upstream
// saw one request. On the embedded store, Redis and PostgreSQL.
func TestEffectKeyHolderKilledMidCall(t *testing.T) {
	bin := buildGateway(t)
	for name, storeSection := range killTestStores("effkill") {
		t.Run(name, func(t *testing.T) {
			var requests atomic.Int64
			release := make(chan struct{})
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				requests.Add(1)
				select { // the holder's refund never answers: its gateway dies first
				case <-release:
				case <-r.Context().Done():
				}
			}))
			t.Cleanup(func() { close(release); up.Close() })
			addr, dir := freeAddr(t), t.TempDir()
			config := filepath.Join(dir, "gateway.yaml")
			yaml := "listen: " + addr + "\n" + storeSection(t) + "idempotency:\n  lock_ttl: 3s\ntools:\n" +
				"  - name: refund\n    http:\n      url: " + up.URL + "\n    lease_expiry: unknown\n    effect_key: \"refund:{/txn_id}\"\n"
			if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			args := `{"amount":5,"txn_id":"t-1"}`
			first := startReplica(t, bin, config, addr)
			go effectCall(t, addr, "holder", 0, args) // answered by nobody: killed
			waitFor(t, func() bool { return requests.Load() == 1 })
			first.kill()
			startReplica(t, bin, config, addr)

			seen := map[string]bool{}
			deadline := time.Now().Add(30 * time.Second)
			for !seen["outcome_unknown"] {
				if time.Now().After(deadline) {
					t.Fatalf("no outcome_unknown within 30s (saw %v)", seen)
				}
				r := effectCall(t, addr, "other", 4, args)
				code := r.problemCode()
				if r.status != http.StatusConflict || (code != "request_in_progress" && code != "outcome_unknown") {
					t.Fatalf("same refund from another session: %d %s", r.status, r.body)
				}
				seen[code] = true
				time.Sleep(200 * time.Millisecond)
			}
			r := effectCall(t, addr, "third", 0, `{"amount":6,"txn_id":"t-1"}`)
			if r.status != http.StatusConflict || r.problemCode() != "effect_conflict" || !strings.Contains(string(r.body), `"state":"UNKNOWN"`) {
				t.Fatalf("other amount: %d %s, want effect_conflict naming the UNKNOWN holder", r.status, r.body)
			}
			if n := requests.Load(); n != 1 {
				t.Fatalf("the upstream got %d refund requests, want 1", n)
			}
		})
	}
}

// effectCall calls refund, answering at once.
func effectCall(t *testing.T, addr, session string, step uint64, args string) reply {
	t.Helper()
	return quickCall(t, addr, session, step, "refund", args)
}
