package gatewaycmd

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/toolgateway/toolgateway/internal/pgtest"
	"github.com/toolgateway/toolgateway/tools"
)

// TestOneSharedStoreOnly: a config naming Redis and PostgreSQL is refused
// with an error that names both fields, whether the file or the
// environment set them.
func TestOneSharedStoreOnly(t *testing.T) {
	for _, tc := range []struct {
		name, config string
		env          map[string]string
		want         []string
	}{
		{"file", "store:\n  redis_url: redis://127.0.0.1:6379/0\n  postgres_url: postgres://127.0.0.1/test\n", nil,
			[]string{"store.redis_url", "store.postgres_url"}},
		{"cluster", "store:\n  cluster_addrs: [\"127.0.0.1:7000\"]\n  postgres_url: postgres://127.0.0.1/test\n", nil,
			[]string{"store.cluster_addrs", "store.postgres_url"}},
		{"environment", "store:\n  redis_url: redis://127.0.0.1:6379/0\n", map[string]string{"DATABASE_URL": "postgres://127.0.0.1/test"},
			[]string{"store.redis_url", "store.postgres_url", "DATABASE_URL"}},
		{"schema without url", "store:\n  postgres_schema: other\n", nil, []string{"store.postgres_schema"}},
		{"bad schema", "store:\n  postgres_url: postgres://127.0.0.1/test\n  postgres_schema: Bad-Name\n", nil, []string{"store.postgres_schema", "Bad-Name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConfig(t, "listen: 127.0.0.1:0\n"+tc.config)
			var out strings.Builder
			err := Run(t.Context(), []string{"gateway", "-config", path}, func(k string) string { return tc.env[k] }, &out)
			if err == nil {
				t.Fatal("the gateway started")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %s", err, w)
				}
			}
		})
	}
}

func TestDatabaseURLOverride(t *testing.T) {
	cfg := &Config{Store: StoreConfig{PostgresURL: "postgres://file/db"}}
	cfg.applyEnv(func(k string) string { return map[string]string{"DATABASE_URL": "postgres://env/db"}[k] })
	if cfg.Store.PostgresURL != "postgres://env/db" {
		t.Fatalf("DATABASE_URL not applied: %q", cfg.Store.PostgresURL)
	}
}

// TestRunOnPostgres starts the real program on the PostgreSQL store (in a
// schema of the test's own): a call runs, its retry replays, the record is
// a row in the configured schema, and the log names the store without the
// connection's user.
func TestRunOnPostgres(t *testing.T) {
	url := pgtest.URL(t)
	schema := pgtest.Schema(t, url)
	g := startGateway(t, "listen: 127.0.0.1:0\nstore:\n  postgres_url: "+url+"\n  postgres_schema: "+schema+"\n")

	respCh := make(chan *http.Response, 1)
	go func() { respCh <- call(t, g.addr, "pg", 1, "cmdtest-slow", `{}`) }()
	testPlugin.release <- struct{}{}
	first := <-respCh
	body, _ := io.ReadAll(first.Body)
	first.Body.Close()
	if first.StatusCode != 200 || first.Header.Get("Idempotent-Replayed") != "false" {
		t.Fatalf("first call: %d %s", first.StatusCode, body)
	}
	again := call(t, g.addr, "pg", 1, "cmdtest-slow", `{}`)
	body2, _ := io.ReadAll(again.Body)
	again.Body.Close()
	if again.StatusCode != 200 || again.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(body, body2) {
		t.Fatalf("retry: %d replayed=%q %s", again.StatusCode, again.Header.Get("Idempotent-Replayed"), body2)
	}

	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var state string
	if err := conn.QueryRow(t.Context(), "SELECT state FROM "+schema+".records WHERE tool = 'cmdtest-slow'").Scan(&state); err != nil || state != "COMPLETED" {
		t.Fatalf("record in schema %s: %q, %v", schema, state, err)
	}
	for _, l := range g.logs.JSONLines() {
		if l["msg"] == "gateway listening" {
			desc, _ := l["store"].(string)
			if !strings.HasPrefix(desc, "postgres:") || !strings.Contains(desc, schema) || strings.Contains(desc, "@") {
				t.Fatalf("store in the start-up log: %q", desc)
			}
		}
	}
}

// txTool is a transactional plugin, for the config check below.
type txTool struct{}

func (txTool) Spec() tools.Spec { return tools.Spec{Name: "cmdtest-tx", Transactional: true} }
func (txTool) Call(context.Context, *tools.Request) (*tools.Response, error) {
	return nil, errors.New("not run")
}

// TestTransactionalToolNeedsPostgresConfig: a config without
// store.postgres_url refuses a transactional plugin, naming it and the
// field that would make it work; with the URL it is accepted.
func TestTransactionalToolNeedsPostgresConfig(t *testing.T) {
	for _, text := range []string{"listen: 127.0.0.1:0\n", "store:\n  redis_url: redis://127.0.0.1:6379/0\n"} {
		cfg, err := LoadConfig(writeConfig(t, text))
		if err != nil {
			t.Fatal(err)
		}
		cfg.withDefaults()
		_, err = cfg.serverOptions([]tools.Tool{txTool{}})
		if err == nil || !strings.Contains(err.Error(), "cmdtest-tx") || !strings.Contains(err.Error(), "store.postgres_url") {
			t.Fatalf("config %q with a transactional tool: %v; want an error naming the tool and store.postgres_url", text, err)
		}
	}
	cfg, err := LoadConfig(writeConfig(t, "store:\n  postgres_url: postgres://127.0.0.1:5432/test\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.withDefaults()
	if _, err := cfg.serverOptions([]tools.Tool{txTool{}}); err != nil {
		t.Fatalf("with store.postgres_url: %v", err)
	}
}
