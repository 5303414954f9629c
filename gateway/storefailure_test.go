package gateway_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/idempotency/redisstore"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// A store failure is logged with the key's prefix only: the error a store
// returns names the record it failed on, and that error reaches the log.
// A full key in a log line could be replayed by whoever reads the log.
func TestStoreFailureLogHasNoFullKey(t *testing.T) {
	// Nothing listens on port 1: every store call fails at once.
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	store := redisstore.New(client, redisstore.Options{Prefix: "storefailure:"})
	logs := &lockedBuffer{}
	h := newHarness(t, storeEmbedded, []tools.Tool{newTestTool("provision")},
		withStore(store), withLogger(slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))

	args := `{"n":1}`
	key := derivedKey(t, "secret-session", 4, "provision", args)
	wantProblem(t, h.do(callSpec{tool: "provision", session: "secret-session", step: 4, args: args}), 503, wire.CodeStoreUnavailable)

	text := logs.String()
	if !strings.Contains(text, "store claim failed") {
		t.Fatalf("no store failure was logged:\n%s", text)
	}
	if !strings.Contains(text, key[:8]) {
		t.Fatalf("the failure's log line lacks the key prefix %s:\n%s", key[:8], text)
	}
	for _, piece := range pieces(key) {
		if strings.Contains(text, piece) {
			t.Fatalf("a log line holds %q, a piece of the full key:\n%s", piece, text)
		}
	}
}
