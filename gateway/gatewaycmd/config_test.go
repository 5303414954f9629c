package gatewaycmd

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgateway/toolgateway/tools"
)

// slowPlugin is a plugin compiled into the test binary, registered the way
// real plugins are: from init.
type slowPlugin struct{ release chan struct{} }

func (p *slowPlugin) Spec() tools.Spec {
	return tools.Spec{Name: "cmdtest-slow", Description: "waits for the test", InputSchema: json.RawMessage(`{"type":"object"}`)}
}

func (p *slowPlugin) Call(ctx context.Context, req *tools.Request) (*tools.Response, error) {
	select {
	case <-p.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return tools.JSON(200, map[string]any{"done": true, "exec": req.ExecutionID})
}

var testPlugin = &slowPlugin{release: make(chan struct{})}

func init() { tools.Register(testPlugin) }

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestBadConfigFailsNamingTheField checks that each mistake stops start-up
// with one line that names the field.
func TestBadConfigFailsNamingTheField(t *testing.T) {
	cases := []struct {
		name, config, want string
	}{
		{"unknown field", "listen: 127.0.0.1:0\nstroe: {}\n", "stroe"},
		{"unknown nested field", "idempotency:\n  lock_tll: 3s\n", "lock_tll"},
		{"bad duration", "idempotency:\n  lock_ttl: 3 seconds\n", "bad duration"},
		{"negative duration", "idempotency:\n  replay_ttl: -1h\n", "bad duration"},
		{"too short lock ttl", "idempotency:\n  lock_ttl: 10ms\n", "idempotency.lock_ttl"},
		{"bad key mode", "idempotency:\n  key_mode: random\n", "idempotency.key_mode"},
		{"missing schema file", "tools:\n  - name: cmdtest-slow\n    schema: schemas/nope.json\n", "tools[0] (cmdtest-slow).schema"},
		{"bad tool name", "tools:\n  - name: Bad_Name\n    http:\n      url: http://127.0.0.1:1/x\n", "tools[0].name"},
		{"tool without plugin or http", "tools:\n  - name: ghost\n", "tools[0] (ghost)"},
		{"bad upstream url", "tools:\n  - name: up\n    http:\n      url: ftp://x\n", "tools[0] (up).http.url"},
		{"bad lease expiry", "tools:\n  - name: cmdtest-slow\n    lease_expiry: never\n", "tools[0] (cmdtest-slow).lease_expiry"},
		{"invalid schema", "tools:\n  - name: cmdtest-slow\n    input_schema: {type: 12}\n", "cmdtest-slow"},
		{"bad tenant hash", "auth:\n  tenants:\n    - name: acme\n      token_sha256: abc\n", "auth.tenants[0].token_sha256"},
		{"bad tenant name", "auth:\n  tenants:\n    - name: 'Acme Inc'\n      token_sha256: " + strings.Repeat("a", 64) + "\n", "auth.tenants[0].name"},
		{"bad admin hash", "admin:\n  token_sha256: xyz\n", "admin.token_sha256"},
		{"previous admin token alone", "admin:\n  previous_token_sha256: " + strings.Repeat("a", 64) + "\n", "admin.previous_token_sha256: set only beside admin.token_sha256"},
		{"bad log level", "log_level: loud\n", "log_level"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConfig(t, tc.config)
			var out strings.Builder
			err := Run(t.Context(), []string{"gateway", "-config", path}, func(string) string { return "" }, &out)
			if err == nil {
				t.Fatalf("started with a bad config")
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.want) {
				t.Fatalf("error %q does not name %q", msg, tc.want)
			}
			if strings.Contains(msg, "\n") {
				t.Fatalf("error is not one line: %q", msg)
			}
		})
	}
}

func TestConfigPathsAreRelativeToTheFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "schemas"), 0o755); err != nil {
		t.Fatal(err)
	}
	schema := `{"type":"object","required":["x"]}`
	if err := os.WriteFile(filepath.Join(dir, "schemas", "s.json"), []byte(schema), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(path, []byte("tools:\n  - name: cmdtest-slow\n    schema: schemas/s.json\n    description: overridden\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg.withDefaults()
	opts, err := cfg.serverOptions(tools.Registered())
	if err != nil {
		t.Fatal(err)
	}
	e, ok := opts.Tools.Lookup("cmdtest-slow")
	if !ok || e.Spec.Description != "overridden" || len(e.Validate(map[string]any{})) == 0 {
		t.Fatalf("schema/description from the config not applied: %+v", e)
	}
	if got := cfg.path(cfg.Store.Path); got != filepath.Join(dir, "data", "gateway.db") {
		t.Fatalf("store path %q not relative to the config file", got)
	}
}

func TestEnvironmentOverrides(t *testing.T) {
	cfg := &Config{Listen: "127.0.0.1:1", Store: StoreConfig{ClusterAddrs: []string{"x:1"}}}
	cfg.applyEnv(func(k string) string {
		return map[string]string{"GATEWAY_ADDR": "127.0.0.1:9999", "REDIS_URL": "redis://127.0.0.1:6379/3"}[k]
	})
	if cfg.Listen != "127.0.0.1:9999" || cfg.Store.RedisURL != "redis://127.0.0.1:6379/3" || cfg.Store.ClusterAddrs != nil {
		t.Fatalf("overrides not applied: %+v", cfg)
	}
}

func TestJSONConfigIsAccepted(t *testing.T) {
	cfg, err := ParseConfig([]byte(`{"listen":"127.0.0.1:0","idempotency":{"lock_ttl":"2s","step_guard":false}}`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Idempotency.LockTTL != Duration(2e9) || cfg.Idempotency.StepGuard == nil || *cfg.Idempotency.StepGuard {
		t.Fatalf("parsed %+v", cfg.Idempotency)
	}
}
