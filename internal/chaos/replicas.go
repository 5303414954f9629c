package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// replica is one gateway process. It keeps its port across restarts, so
// agents always know where the replicas are; a dead one refuses
// connections and the SDK retries elsewhere.
type replica struct {
	name, addr, config, binary string
	log                        *os.File

	mu    sync.Mutex
	cmd   *exec.Cmd
	kills []time.Time
}

// storeSection is the gateways' store configuration.
type storeSection struct {
	RedisURL     string   `json:"redis_url,omitempty"`
	ClusterAddrs []string `json:"cluster_addrs,omitempty"`
	PostgresURL  string   `json:"postgres_url,omitempty"`
}

// The tools' timeout and the gateways' drain_timeout: with uncertain
// outcomes injected, short enough that slow calls (slowCall) time out and
// drains cut calls in flight short.
const (
	toolTimeout          = 10 * time.Second
	toolTimeoutUncertain = time.Second
	drainTimeout         = 5 * time.Second
	drainTimeoutShort    = 200 * time.Millisecond
)

// writeConfig writes replica name's config file (JSON, which is YAML).
func writeConfig(path, name string, store storeSection, up *upstream, lockTTL time.Duration) error {
	timeout, drain := toolTimeout, drainTimeout
	if up.uncertain {
		timeout, drain = toolTimeoutUncertain, drainTimeoutShort
	}
	tool := func(toolName, leaseExpiry string) map[string]any {
		return map[string]any{
			"name":         toolName,
			"description":  "chaos upstream that counts executions",
			"lease_expiry": leaseExpiry,
			"timeout":      timeout.String(),
			"input_schema": map[string]any{"type": "object"},
			"http": map[string]any{
				"url":     up.url(toolName),
				"headers": map[string]string{replicaHeader: name},
			},
		}
	}
	cfg := map[string]any{
		"listen":        "127.0.0.1:0", // GATEWAY_ADDR sets the replica's fixed port
		"drain_timeout": drain.String(),
		"log_level":     "warn",
		"store":         store,
		"idempotency":   map[string]any{"lock_ttl": lockTTL.String()},
		"tools":         []any{tool(toolRerun, "rerun"), tool(toolUnknown, "unknown")},
	}
	if up.reconcile {
		unknown := tool(toolUnknown, "unknown")
		unknown["reconcile"] = up.reconcileSection()
		cfg["tools"] = []any{tool(toolRerun, "rerun"), unknown}
	}
	raw, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return fmt.Errorf("chaos: config: %w", err)
	}
	return os.WriteFile(path, raw, 0o644)
}

func newReplica(dir, binary, name string, store storeSection, up *upstream, lockTTL time.Duration) (*replica, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	r := &replica{name: name, addr: fmt.Sprintf("127.0.0.1:%d", port), binary: binary,
		config: filepath.Join(dir, name+".json")}
	if err := writeConfig(r.config, name, store, up, lockTTL); err != nil {
		return nil, err
	}
	if r.log, err = os.Create(filepath.Join(dir, name+".log")); err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	return r, nil
}

// start launches the process and waits until /healthz answers.
func (r *replica) start(ctx context.Context) error {
	cmd := exec.Command(r.binary, "-config", r.config)
	cmd.Env = append(os.Environ(), "GATEWAY_ADDR="+r.addr, "REDIS_URL=")
	cmd.Stdout, cmd.Stderr = r.log, r.log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("chaos: start %s: %w", r.name, err)
	}
	r.mu.Lock()
	r.cmd = cmd
	r.mu.Unlock()
	return waitHealthy(ctx, "http://"+r.addr+"/healthz")
}

// kill sends SIGKILL: the process dies wherever it is, mid-tool included.
func (r *replica) kill() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait() // killed: the exit status is an error by design
	r.cmd = nil
	r.kills = append(r.kills, time.Now())
}

// term sends SIGTERM and waits for the process to exit: a drain, which
// cancels the tools that outlive drain_timeout. It counts as a death for
// the calls it cut short.
func (r *replica) term() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return
	}
	r.kills = append(r.kills, time.Now())
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	_ = r.cmd.Wait()
	r.cmd = nil
	r.kills = append(r.kills, time.Now()) // the calls it cancelled ended by now
}

// stop ends the process with SIGTERM (a graceful drain), SIGKILL after 10 s.
func (r *replica) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = r.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = r.cmd.Process.Kill()
		<-done
	}
	r.cmd = nil
	_ = r.log.Close()
}

// killTimes returns when the replica was killed.
func (r *replica) killTimes() []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Time(nil), r.kills...)
}

func waitHealthy(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("chaos: %s never became healthy: %w", url, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("chaos: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
