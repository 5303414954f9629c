package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/storetest"
	"github.com/toolgateway/toolgateway/internal/redistest"
)

// redisCost reads what the cost figures need from a private Redis.
type redisCost struct {
	usedMemory int64
	cpuMicros  float64 // used_cpu_user + used_cpu_sys of the server
	evalMicros int64   // usec of EVALSHA in commandstats
	evalCalls  int64
}

func readCost(ctx context.Context, tb testing.TB, c *redis.Client) redisCost {
	tb.Helper()
	info, err := c.Info(ctx, "memory", "cpu", "commandstats").Result()
	if err != nil {
		tb.Fatal(err)
	}
	var rc redisCost
	for _, line := range strings.Split(info, "\r\n") {
		k, v, _ := strings.Cut(line, ":")
		switch k {
		case "used_memory":
			rc.usedMemory, _ = strconv.ParseInt(v, 10, 64)
		case "used_cpu_user", "used_cpu_sys":
			f, _ := strconv.ParseFloat(v, 64)
			rc.cpuMicros += f * 1e6
		case "cmdstat_evalsha":
			for _, kv := range strings.Split(v, ",") {
				name, val, _ := strings.Cut(kv, "=")
				n, _ := strconv.ParseInt(val, 10, 64)
				switch name {
				case "calls":
					rc.evalCalls = n
				case "usec":
					rc.evalMicros = n
				}
			}
		}
	}
	return rc
}

// BenchmarkMemoryPerCall stores storetest.ReferenceCalls completed calls (claim + complete,
// 120-byte bodies) on a private redis-server and reports the used_memory
// delta per call (record and step entry included), then replays each once,
// and reports the server's CPU (INFO cpu) and script time (commandstats)
// per fresh call and per replay. Run with -benchtime=1x: one iteration is
// the whole measurement. The sub-benchmarks send the calls from 1 and from
// 16 goroutines.
func BenchmarkMemoryPerCall(b *testing.B) {
	for _, workers := range []int{1, 16} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			for b.Loop() {
				measureCost(b, workers, Options{})
			}
		})
	}
}

func measureCost(b *testing.B, workers int, opts Options) {
	server := redistest.Start(b)
	client := redis.NewClient(&redis.Options{Addr: server.Addr, PoolSize: workers + 4})
	defer client.Close()
	ctx := b.Context()
	store := New(client, opts)
	reqs := make([]idempotency.ClaimRequest, storetest.ReferenceCalls)
	for i := range reqs {
		reqs[i] = storetest.ReferenceCall(i)
	}
	// Load the scripts and warm the allocator outside the measurement.
	warm := storetest.ReferenceCall(-1)
	warm.Scope.Tenant = "warm"
	if d, err := store.Claim(ctx, warm); err != nil || store.Complete(ctx, d.Lease, idempotency.StoredResponse{Status: 200, ContentType: "application/json", Body: storetest.ReferenceBody}, time.Hour) != nil {
		b.Fatalf("warm-up: %v", err)
	}
	resp := idempotency.StoredResponse{Status: 200, ContentType: "application/json", Body: storetest.ReferenceBody}
	run := func(op func(i int) error) {
		if err := storetest.ForEachReferenceCall(workers, op); err != nil {
			b.Fatal(err)
		}
	}
	before := readCost(ctx, b, client)
	// Every call claimed first (the open records, arguments included),
	// then every one completed (the arguments dropped).
	leases := make([]idempotency.Lease, len(reqs))
	run(func(i int) error {
		d, err := store.Claim(ctx, reqs[i])
		if err != nil || d.Outcome != idempotency.OutcomeClaimed {
			return fmt.Errorf("claim %d: %v %v", i, d.Outcome, err)
		}
		leases[i] = d.Lease
		return nil
	})
	open := readCost(ctx, b, client)
	run(func(i int) error { return store.Complete(ctx, leases[i], resp, time.Hour) })
	fresh := readCost(ctx, b, client)
	run(func(i int) error {
		d, err := store.Claim(ctx, reqs[i])
		if err != nil || d.Outcome != idempotency.OutcomeReplay || len(d.Response.Body) != len(storetest.ReferenceBody) {
			return fmt.Errorf("replay %d: %v %v", i, d.Outcome, err)
		}
		return nil
	})
	replay := readCost(ctx, b, client)
	// FindExecution of an id no record has walks every record.
	start := time.Now()
	if _, err := store.FindExecution(ctx, "01KBJZZZZZZZZZZZZZZZZZZZZZ"); !errors.Is(err, idempotency.ErrNotFound) {
		b.Fatalf("find execution: %v", err)
	}
	walk := time.Since(start)
	after := readCost(ctx, b, client)
	keys, err := client.DBSize(ctx).Result()
	if err != nil {
		b.Fatal(err)
	}
	// MEMORY USAGE of one call's two keys (what Redis counts per key: name,
	// value and main-dictionary entry; not the expiry entry nor the slots).
	recordUsage := client.MemoryUsage(ctx, store.keys.record(reqs[0].Scope, store.keys.slotStep(reqs[0]))).Val()
	stepUsage := client.MemoryUsage(ctx, store.keys.step(reqs[0].Scope.Tenant, *reqs[0].Step)).Val()
	if recordUsage == 0 || stepUsage == 0 {
		b.Fatalf("MEMORY USAGE of a call's keys: record %d, step entry %d bytes", recordUsage, stepUsage)
	}
	n := float64(storetest.ReferenceCalls)
	b.ReportMetric(float64(open.usedMemory-before.usedMemory)/n, "redis-bytes/open-call")
	b.ReportMetric(float64(fresh.usedMemory-before.usedMemory)/n, "redis-bytes/call")
	b.ReportMetric(float64(keys)/n, "keys/call")
	b.ReportMetric(float64(recordUsage), "record-usage-bytes")
	b.ReportMetric(float64(stepUsage), "step-usage-bytes")
	b.ReportMetric((fresh.cpuMicros-before.cpuMicros)/n, "redis-cpu-µs/fresh")
	b.ReportMetric(float64(fresh.evalMicros-before.evalMicros)/n, "script-µs/fresh")
	b.ReportMetric((replay.cpuMicros-fresh.cpuMicros)/n, "redis-cpu-µs/replay")
	b.ReportMetric(float64(replay.evalMicros-fresh.evalMicros)/n, "script-µs/replay")
	b.ReportMetric(float64(walk.Milliseconds()), "findexec-walk-ms")
	b.ReportMetric((after.cpuMicros-replay.cpuMicros)/1000, "findexec-redis-cpu-ms")
}
