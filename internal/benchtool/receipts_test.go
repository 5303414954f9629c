package benchtool

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/internal/redistest"
)

// TestReceiptsBesideTheGateway loads the gateway with receipts off and on,
// in fresh and replay mode: every fresh call's receipt is written inside
// its run (none for replays), the CPU checks are computed, and Close
// deletes the receipt chains with the rest of the run's keys.
func TestReceiptsBesideTheGateway(t *testing.T) {
	addr := redistest.Addr(t)
	servers, err := StartServers(t.Context(), ServersConfig{RedisAddr: addr, Receipts: true})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = servers.Close()
		}
	})
	gw := Target{Name: "gateway", URLs: servers.GatewayURLs, RoundTrips: servers.StoreRoundTrips, Tool: servers.Tool, RedisCPU: servers.RedisCPU}
	on := gw
	on.Name, on.URLs, on.RoundTrips, on.Beside = ReceiptsName, servers.ReceiptGatewayURLs, servers.ReceiptStoreRoundTrips, "gateway"
	counts := func(context.Context) (ReceiptCounts, error) { return servers.ReceiptCounts(), nil }
	on.Settle = func(ctx context.Context) error { return WaitReceipts(ctx, counts) }
	on.Receipts = func(context.Context) (int64, error) { return servers.ReceiptCounts().Written, nil }

	for _, mode := range []Mode{ModeFresh, ModeReplay} {
		report, err := RunBench(t.Context(), BenchConfig{
			Targets: []Target{gw, on},
			Load:    LoadConfig{Mode: mode, Workers: 4, PoolSize: 40}, Rounds: 2, Duration: 300 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		off, with := report.Targets[0].Result, report.Targets[1].Result
		if off.Requests == 0 || with.Requests == 0 || off.Receipts != -1 {
			t.Fatalf("%s: %d and %d requests, %d receipts counted with receipts off", mode, off.Requests, with.Requests, off.Receipts)
		}
		want := with.FreshCalls()
		if mode == ModeReplay {
			want = 0
		}
		if with.Receipts != want || (mode == ModeFresh && want != with.Requests) {
			t.Errorf("%s: %d receipts written for %d requests, %d fresh; want %d", mode, with.Receipts, with.Requests, with.FreshCalls(), want)
		}
		var cpuChecks int
		for _, c := range report.Checks() {
			if c.Correctness && !c.Pass {
				t.Errorf("%s: check failed: %+v", mode, c)
			}
			if strings.HasPrefix(c.Name, "receipts server CPU per") || strings.HasPrefix(c.Name, "receipts Redis CPU per") {
				cpuChecks++
			}
		}
		if cpuChecks != 2 {
			t.Errorf("%s: %d receipts CPU checks, want server and Redis", mode, cpuChecks)
		}
	}
	if written := servers.ReceiptCounts().Written; written == 0 {
		t.Fatal("no receipt written")
	}
	probe := redis.NewClient(&redis.Options{Addr: addr})
	defer probe.Close()
	closed = true
	if err := servers.Close(); err != nil {
		t.Fatal(err)
	}
	if keys, err := probe.Keys(t.Context(), servers.Prefix+"*").Result(); err != nil || len(keys) != 0 {
		t.Fatalf("after Close: %d keys %s* left (%v)", len(keys), servers.Prefix, err)
	}
}

// TestReceiptsOnNeedRedis: the embedded store is refused with receipts,
// before anything starts.
func TestReceiptsOnNeedRedis(t *testing.T) {
	_, err := StartServers(t.Context(), ServersConfig{RedisAddr: redistest.Addr(t), Receipts: true, BoltPath: t.TempDir() + "/b.db"})
	if err == nil || !strings.Contains(err.Error(), "Redis") {
		t.Fatalf("receipts on the embedded store: %v", err)
	}
}
