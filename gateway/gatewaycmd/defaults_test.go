package gatewaycmd

// Acceptance tests of the configuration contract (docs/configuration.md) at the program level: Run with
// real arguments, environment and working directory.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/internal/redistest"
	"github.com/toolgateway/toolgateway/internal/testutil"
)

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
