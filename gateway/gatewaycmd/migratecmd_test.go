package gatewaycmd

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/internal/pgtest"
	"github.com/toolgateway/toolgateway/internal/redistest"
)

// migrateStores are a fresh store of each kind, as the store section of a
// config (with store.migrate: false appended by the test).
func migrateStores(t *testing.T) map[string]string {
	client := redis.NewClient(&redis.Options{Addr: redistest.Addr(t)})
	prefix := redistest.Prefix("gwmigrate")
	t.Cleanup(func() {
		redistest.CleanPrefix(context.Background(), client, prefix)
		_ = client.Close()
	})
	url := pgtest.URL(t)
	return map[string]string{
		"embedded": "  path: " + filepath.Join(t.TempDir(), "gw.db") + "\n",
		"redis":    "  redis_url: redis://" + redistest.Addr(t) + "/0\n  key_prefix: \"" + prefix + "\"\n",
		"postgres": "  postgres_url: " + url + "\n  postgres_schema: " + pgtest.Schema(t, url) + "\n",
	}
}

// layoutOf reads the store's layout version the way start-up sees it.
func layoutOf(t *testing.T, cfg *Config) idempotency.LayoutVersion {
	t.Helper()
	store, _, err := cfg.openStoreAnyLayout(t.Context(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	v, err := store.(idempotency.Layouts).LayoutVersion(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestMigrateCommand, for each store kind: with store.migrate false a
// gateway refuses to start on a store that is behind, in one line naming
// `gateway migrate`; `migrate -print` says what it would do and changes
// nothing; `migrate` applies it and prints the versions before and after;
// then the gateway starts, and a second `migrate` changes nothing.
func TestMigrateCommand(t *testing.T) {
	for kind, section := range migrateStores(t) {
		t.Run(kind, func(t *testing.T) {
			path := writeConfig(t, "listen: 127.0.0.1:0\nstore:\n"+section+"  migrate: false\n")
			cfg, _, err := loadConfig(path, func(string) string { return "" })
			if err != nil {
				t.Fatal(err)
			}
			writes := layoutOf(t, cfg).Writes
			_, _, err = cfg.openStore(t.Context(), slog.New(slog.DiscardHandler))
			if err == nil || !strings.Contains(err.Error(), "gateway migrate") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("start-up on an empty store with migrate false = %v, want one line naming gateway migrate", err)
			}
			// The whole program exits with that error too, before it says
			// anything else about the store and before it starts (here:
			// connects to) an MCP server.
			var mcpHits atomic.Int64
			mcpServer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				mcpHits.Add(1)
				http.Error(w, "not an MCP server", http.StatusTeapot)
			}))
			defer mcpServer.Close()
			withMCP := writeConfig(t, "listen: 127.0.0.1:0\nstore:\n"+section+"  migrate: false\nmcp_servers:\n  - name: m\n    url: "+mcpServer.URL+"\n")
			var logs strings.Builder
			if err := Run(t.Context(), []string{"gateway", "-config", withMCP}, func(string) string { return "" }, &logs); err == nil || !strings.Contains(err.Error(), "gateway migrate") {
				t.Fatalf("gateway with migrate false on a store that is behind = %v", err)
			}
			if strings.Contains(logs.String(), "does not answer") || mcpHits.Load() != 0 {
				t.Fatalf("before refusing the store: %d requests to the MCP server, logs:\n%s", mcpHits.Load(), logs.String())
			}

			var out strings.Builder
			if err := RunIO(t.Context(), []string{"gateway", "migrate", "-config", path, "-print"}, func(string) string { return "" }, nil, &out); err != nil {
				t.Fatalf("migrate -print: %v", err)
			}
			printed := out.String()
			if !strings.Contains(printed, "layout version 0, this gateway writes "+strconv.Itoa(writes)) {
				t.Fatalf("migrate -print:\n%s", printed)
			}
			want := map[string]string{"embedded": "meta/layout = ", "redis": "SET " + "", "postgres": "CREATE TABLE IF NOT EXISTS"}[kind]
			if !strings.Contains(printed, want) {
				t.Fatalf("migrate -print does not show %q:\n%s", want, printed)
			}
			if v := layoutOf(t, cfg); v.Found != 0 {
				t.Fatalf("migrate -print changed the layout to %d", v.Found)
			}

			out.Reset()
			if err := RunIO(t.Context(), []string{"gateway", "migrate", "-config", path}, func(string) string { return "" }, nil, &out); err != nil {
				t.Fatalf("migrate: %v", err)
			}
			if !strings.Contains(out.String(), "layout version before: 0\n") || !strings.Contains(out.String(), "layout version after:  "+strconv.Itoa(writes)+"\n") {
				t.Fatalf("migrate:\n%s", out.String())
			}
			store, _, err := cfg.openStore(t.Context(), slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatalf("start-up after migrate: %v", err)
			}
			// The migrated store decides.
			d, err := store.Claim(t.Context(), idempotency.ClaimRequest{
				Scope: idempotency.Scope{Tenant: "t", Tool: "tool", Key: "k"}, Fingerprint: "fp",
				ExecutionID: "exec", Owner: "owner", LockTTL: 1e9, ReplayTTL: 1e9,
			})
			_ = store.Close()
			if err != nil || d.Outcome != idempotency.OutcomeClaimed {
				t.Fatalf("claim after migrate: %v %v", d.Outcome, err)
			}

			out.Reset()
			if err := RunIO(t.Context(), []string{"gateway", "migrate", "-config", path}, func(string) string { return "" }, nil, &out); err != nil {
				t.Fatalf("second migrate: %v", err)
			}
			if !strings.Contains(out.String(), "before: "+strconv.Itoa(writes)) || !strings.Contains(out.String(), "after:  "+strconv.Itoa(writes)) {
				t.Fatalf("second migrate:\n%s", out.String())
			}
		})
	}
}

// TestMigrateDefaultsOn: without store.migrate, start-up sets the layout up
// as it always did.
func TestMigrateDefaultsOn(t *testing.T) {
	cfg, _, err := loadConfig(writeConfig(t, "store:\n  path: "+filepath.Join(t.TempDir(), "gw.db")+"\n"), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	store, _, err := cfg.openStore(t.Context(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	_ = store.Close()
	if v := layoutOf(t, cfg); v.Found != v.Writes {
		t.Fatalf("layout after a default start-up = %+v, want the version this gateway writes", v)
	}
}
