// Command chaos is the gateway's fault-injection run: it starts N gateway
// processes on one Redis, a 3-master Redis Cluster or a private
// PostgreSQL, an upstream tool that counts executions per key and M agents
// (agentclient over REST, go-sdk over MCP with -mcp) that replay every step
// until they get a final answer, while it SIGKILLs (or, with -uncertain,
// drains) and restarts random replicas and kills the store, restarting it at
// once or after -store-down-for. With -uncertain the upstream also outlives
// the tools' timeout and drops connections after reading the request. It
// prints the figures and the exactly-once invariants, and exits 1 if one
// broke. See docs/reliability.md.
//
//	go build -o /tmp/gateway ./cmd/gateway
//	go run ./cmd/chaos -gateway /tmp/gateway -duration 2m -cluster
//	go run ./cmd/chaos -gateway /tmp/gateway -duration 2m -postgres
//	go run ./cmd/chaos -gateway /tmp/gateway -duration 2m -uncertain -mcp
//	go run ./cmd/chaos -gateway /tmp/gateway -postgres -replicas 2 -mcp -duration 40s \
//	    -redis-restart-every 12s -store-down-for 6s -lock-ttl 3s -kill-every 1h
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/toolgateway/toolgateway/internal/chaos"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	gateway := fs.String("gateway", "", "gateway binary (absent: go build ./cmd/gateway into the work dir)")
	workDir := fs.String("workdir", "", "directory for configs, gateway logs and Redis data (absent: a new temporary one, kept)")
	cluster := fs.Bool("cluster", false, "use a 3-master Redis Cluster instead of one Redis")
	postgres := fs.Bool("postgres", false, "use a private PostgreSQL (initdb + postgres) instead of Redis")
	replicas := fs.Int("replicas", 3, "gateway processes (at least 2)")
	agents := fs.Int("agents", 8, "concurrent agents")
	duration := fs.Duration("duration", 20*time.Second, "how long faults are injected and new steps started")
	killEvery := fs.Duration("kill-every", time.Second, "mean time between two SIGKILLs of a gateway")
	redisEvery := fs.Duration("redis-restart-every", 5*time.Second, "mean time between two kill+restarts of the store (Redis node or PostgreSQL)")
	lockTTL := fs.Duration("lock-ttl", time.Second, "the gateways' idempotency.lock_ttl")
	storeDownFor := fs.Duration("store-down-for", 0, "how long the store stays down at each kill (0: restarted at once)")
	useMCP := fs.Bool("mcp", false, "send about half of the agents' attempts over MCP (POST /mcp) instead of REST")
	uncertain := fs.Bool("uncertain", false, "inject uncertain outcomes: upstream calls outliving the 1 s tool timeout, dropped connections, SIGTERM drains of 200 ms")
	reconcileFlag := fs.Bool("reconcile", false, "give the lease_expiry: unknown tool a reconcile: endpoint that knows what the upstream ran; every step must end with a result, none outcome_unknown")
	seed := fs.Uint64("seed", 0, "random seed (0: from the clock)")
	verbose := fs.Bool("v", false, "print progress (kills, restarts)")
	if err := fs.Parse(args); err != nil {
		return err
	}

	dir := *workDir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "chaos-"); err != nil {
			return err
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	bin := *gateway
	if bin == "" {
		bin = filepath.Join(dir, "gateway")
		build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/toolgateway/toolgateway/cmd/gateway")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("go build cmd/gateway: %w", err)
		}
	}
	var progress io.Writer = io.Discard
	if *verbose {
		progress = os.Stderr
	}
	report, err := chaos.Run(ctx, chaos.Config{
		GatewayBinary: bin, WorkDir: dir, Cluster: *cluster, Postgres: *postgres,
		Replicas: *replicas, Agents: *agents, Duration: *duration,
		KillEvery: *killEvery, RedisRestartEvery: *redisEvery, LockTTL: *lockTTL,
		StoreDownFor: *storeDownFor, MCP: *useMCP, Uncertain: *uncertain, Reconcile: *reconcileFlag,
		Seed: *seed, Log: progress,
	})
	if err != nil {
		return err
	}
	report.Print(stdout)
	fmt.Fprintf(stdout, "  gateway logs and configs: %s\n", dir)
	if !report.OK() {
		return fmt.Errorf("%d invariant violation(s)", len(report.Violations))
	}
	return nil
}
