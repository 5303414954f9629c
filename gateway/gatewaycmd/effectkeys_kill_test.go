package gatewaycmd

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/internal/redistest"
	"github.com/toolgateway/toolgateway/keyderive"
)

// TestEffectKeyHolderKilledMidCall runs the real gateway program with a
// refund tool (effect_key on txn_id, lease_expiry: unknown), SIGKILLs it
// while the refund runs at the upstream, and restarts it on the same
// store. The same refund from other sessions never runs it again: in
// progress while the dead holder's lease lives, then outcome_unknown; with
// another amount, effect_conflict naming the UNKNOWN holder. The upstream
// saw one request. On the embedded store and on Redis.
func TestEffectKeyHolderKilledMidCall(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "gateway")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/toolgateway/toolgateway/cmd/gateway").CombinedOutput(); err != nil {
		t.Fatalf("go build cmd/gateway: %v\n%s", err, out)
	}
	stores := map[string]func(dir string) string{
		"embedded": func(dir string) string { return "  path: " + filepath.Join(dir, "gw.db") + "\n" },
		"redis": func(string) string {
			addr, prefix := redistest.Addr(t), redistest.Prefix("effkill")
			t.Cleanup(func() {
				c := redis.NewClient(&redis.Options{Addr: addr})
				redistest.CleanPrefix(context.Background(), c, prefix)
				_ = c.Close()
			})
			return "  redis_url: redis://" + addr + "/0\n  key_prefix: \"" + prefix + "\"\n"
		},
	}
	for name, store := range stores {
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
			yaml := "listen: " + addr + "\nstore:\n" + store(dir) + "idempotency:\n  lock_ttl: 3s\ntools:\n" +
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

// effectCall calls refund with derived key headers, answering at once.
func effectCall(t *testing.T, addr, session string, step uint64, args string) reply {
	t.Helper()
	key, err := keyderive.Key(session, step, "refund", []byte(args))
	if err != nil {
		t.Error(err)
		return reply{}
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/api/tools/v1/refund", strings.NewReader(args))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Agent-Session-Id", session)
	req.Header.Set("Agent-Step-Index", itoa(step))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return reply{} // the killed holder's call
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: body}
}
