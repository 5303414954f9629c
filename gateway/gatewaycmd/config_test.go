package gatewaycmd

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/internal/redistest"
	"github.com/toolgateway/toolgateway/internal/testutil"
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
		{"bad keep_arguments", "idempotency:\n  keep_arguments: sometimes\n", "keep_arguments"},
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
		{"too short receipts retention", "receipts:\n  retention: 5m\n", "receipts.retention"},
		{"too short receipts recover_after", "receipts:\n  recover_after: 10ms\n", "receipts.recover_after"},
		{"bad receipts enabled", "receipts:\n  enabled: maybe\n", "enabled"},
		{"missing receipts signing key", "receipts:\n  signing_key: /nonexistent/key.pem\n", "receipts.signing_key"},
		{"receipts signing key not a key", "receipts:\n  signing_key: gateway.yaml\n", "receipts.signing_key gateway.yaml"},
		{"missing receipts verify key", "receipts:\n  verify_keys: [/nonexistent/old.pem]\n", "receipts.verify_keys[0]"},
		{"too short checkpoint interval", "receipts:\n  checkpoint_every: 10ms\n", "receipts.checkpoint_every"},
		{"zero checkpoint count", "receipts:\n  checkpoint_every: 0\n", "checkpoint_every"},
		{"tsa url without a signing key", "receipts:\n  anchor:\n    tsa_url: http://127.0.0.1:1/tsa\n", "receipts.anchor.tsa_url"},
		{"bad tsa url", "receipts:\n  anchor:\n    tsa_url: tsa.example\n", "receipts.anchor.tsa_url"},
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

// runProgram starts Run with args and env and waits for "gateway listening";
// it returns the listen address and the startup log line.
func runProgram(t *testing.T, args []string, env map[string]string) (string, map[string]any) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logs := &testutil.LockedBuffer{}
	done := make(chan error, 1)
	go func() { done <- Run(ctx, args, func(k string) string { return env[k] }, logs) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, l := range logs.JSONLines() {
			if l["msg"] == "gateway listening" {
				addr, _ := l["addr"].(string)
				return addr, l
			}
		}
		select {
		case err := <-done:
			t.Fatalf("gateway exited at start: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("gateway did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func getBody(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// TestDefaultsWithoutConfig: without a config the gateway listens on
// 127.0.0.1:8080 and uses the embedded store (data/gateway.db in the working
// directory) with the compiled-in tools. GATEWAY_ADDR moves it to a free
// port here, since 8080 may be taken on the test machine.
func TestDefaultsWithoutConfig(t *testing.T) {
	cfg := &Config{}
	cfg.applyEnv(func(string) string { return "" })
	cfg.withDefaults()
	if cfg.Listen != "127.0.0.1:8080" || cfg.Store.RedisURL != "" || len(cfg.Store.ClusterAddrs) != 0 {
		t.Fatalf("defaults without a config: listen %q, redis %q %v", cfg.Listen, cfg.Store.RedisURL, cfg.Store.ClusterAddrs)
	}

	dir := t.TempDir()
	t.Chdir(dir)
	addr, start := runProgram(t, []string{"gateway"}, map[string]string{"GATEWAY_ADDR": "127.0.0.1:0"})
	if start["store"] != "embedded:data/gateway.db" {
		t.Fatalf("store %v, want the embedded store", start["store"])
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "gateway.db")); err != nil {
		t.Fatalf("embedded store file: %v", err)
	}
	status, body := getBody(t, "http://"+addr+"/api/tools/v1/cmdtest-slow")
	if status != 200 {
		t.Fatalf("compiled-in plugin not served: %d %s", status, body)
	}
}

// TestEnvironmentOverridesTheFile runs the program with a config
// whose listen address cannot be bound and whose store is embedded, and
// shows GATEWAY_ADDR and REDIS_URL win: it serves on GATEWAY_ADDR and its
// store is the Redis of REDIS_URL (the file's key_prefix, unique here, still
// applies; nothing is written).
func TestEnvironmentOverridesTheFile(t *testing.T) {
	redisAddr := redistest.Addr(t)
	prefix := redistest.Prefix("gwcontract")
	dir := t.TempDir()
	path := filepath.Join(dir, "gateway.yaml")
	text := "listen: 256.0.0.1:1\nstore:\n  path: state/gw.db\n  key_prefix: \"" + prefix + "\"\n"
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, start := runProgram(t, []string{"gateway", "-config", path},
		map[string]string{"GATEWAY_ADDR": "127.0.0.1:0", "REDIS_URL": "redis://" + redisAddr + "/0"})
	if start["store"] != "redis:"+redisAddr {
		t.Fatalf("store %v, want REDIS_URL's", start["store"])
	}
	if _, err := os.Stat(filepath.Join(dir, "state")); !os.IsNotExist(err) {
		t.Fatalf("the embedded store was opened although REDIS_URL was set: %v", err)
	}
	if status, body := getBody(t, "http://"+addr+"/readyz"); status != 200 {
		t.Fatalf("/readyz on REDIS_URL's Redis: %d %s", status, body)
	}
}

// TestPathsAreRelativeToTheConfigFile runs the program from another
// working directory and checks store.path and a tool's schema file resolve
// against the config file's directory.
func TestPathsAreRelativeToTheConfigFile(t *testing.T) {
	confDir, workDir := t.TempDir(), t.TempDir()
	schema := `{"type":"object","required":["x"]}`
	if err := os.MkdirAll(filepath.Join(confDir, "schemas"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(confDir, "schemas", "s.json"), []byte(schema), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(confDir, "gateway.yaml")
	text := "store:\n  path: state/gw.db\ntools:\n  - name: cmdtest-slow\n    schema: schemas/s.json\n"
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(workDir)
	addr, _ := runProgram(t, []string{"gateway", "-config", path}, map[string]string{"GATEWAY_ADDR": "127.0.0.1:0"})
	if _, err := os.Stat(filepath.Join(confDir, "state", "gw.db")); err != nil {
		t.Fatalf("store.path not resolved against the config file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(workDir, "state")); !os.IsNotExist(err) {
		t.Fatalf("store.path resolved against the working directory: %v", err)
	}
	status, body := getBody(t, "http://"+addr+"/api/tools/v1/cmdtest-slow")
	var tool struct {
		InputSchema json.RawMessage `json:"input_schema"`
	}
	if err := json.Unmarshal(body, &tool); status != 200 || err != nil || string(tool.InputSchema) != schema {
		t.Fatalf("schema file not loaded relative to the config: %d %s", status, body)
	}
}

func TestServerLimitsDefaultsAndOverrides(t *testing.T) {
	cfg, err := ParseConfig([]byte("listen: 127.0.0.1:0\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.withDefaults()
	if got := cfg.Server; time.Duration(got.ReadHeaderTimeout) != DefaultReadHeaderTimeout || time.Duration(got.ReadTimeout) != DefaultReadTimeout ||
		time.Duration(got.IdleTimeout) != DefaultIdleTimeout || got.MaxHeaderBytes != DefaultMaxHeaderBytes {
		t.Fatalf("defaults %+v", got)
	}
	cfg, err = ParseConfig([]byte("server:\n  read_header_timeout: 2s\n  read_timeout: 30s\n  idle_timeout: 1m\n  max_header_bytes: 8192\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.withDefaults()
	if got := cfg.Server; time.Duration(got.ReadHeaderTimeout) != 2*time.Second || time.Duration(got.ReadTimeout) != 30*time.Second ||
		time.Duration(got.IdleTimeout) != time.Minute || got.MaxHeaderBytes != 8192 {
		t.Fatalf("overrides %+v", got)
	}
	for _, bad := range []string{"server:\n  read_timeout: -1s\n", "server:\n  read_timeot: 1s\n", "server:\n  max_header_bytes: lots\n"} {
		if _, err := ParseConfig([]byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

// TestServerLimitsAreEnforced runs the real program with small limits: a
// request with oversized headers gets 431, and a client that stops in the
// middle of its headers is disconnected after read_header_timeout.
func TestServerLimitsAreEnforced(t *testing.T) {
	dir := t.TempDir()
	g := startGateway(t, "listen: 127.0.0.1:0\nstore:\n  path: "+filepath.Join(dir, "gw.db")+
		"\nserver:\n  read_header_timeout: 300ms\n  max_header_bytes: 4096\n")

	req, _ := http.NewRequest(http.MethodGet, "http://"+g.addr+"/healthz", nil)
	req.Header.Set("X-Pad", strings.Repeat("p", 16<<10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("16 KiB of headers: %d, want 431", resp.StatusCode)
	}

	conn, err := net.Dial("tcp", g.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST /api/tools/v1/x HTTP/1.1\r\nHost: gw\r\nIdempotency-Key: "); err != nil {
		t.Fatal(err)
	}
	// The default read_header_timeout is 10 s; the configured 300 ms must
	// close the connection long before this deadline.
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = io.ReadAll(conn)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("a client stalled in its headers was not disconnected")
	}
}
