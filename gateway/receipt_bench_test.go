package gateway_test

import (
	"context"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/receipts"
	"github.com/toolgateway/toolgateway/internal/redistest"
)

// What receipts cost, side by side: BenchmarkRequest/redis (receipts off)
// and BenchmarkRequest/redis-receipts (on). ns/op is the caller's latency;
// the receipt is written after the answer, by the writer goroutine, so
// the CPU it costs shows in cpu-ns/op (the whole process's CPU time per
// call, the writer flushed before it is read) and redis-cpu-ns/op
// (Redis's own, from INFO cpu: noisy on a Redis other work shares).

// cpuMeter reads the process's and Redis's CPU time around a benchmark.
type cpuMeter struct {
	client         *redis.Client
	proc, redisCPU time.Duration
}

func startCPUMeter(b *testing.B) *cpuMeter {
	client := redis.NewClient(&redis.Options{Addr: redistest.Addr(b)})
	b.Cleanup(func() { _ = client.Close() })
	return &cpuMeter{client: client, proc: processCPU(b), redisCPU: redisCPU(b, client)}
}

// report flushes (the receipts) and reports the CPU per call.
func (m *cpuMeter) report(b *testing.B, flush func()) {
	flush()
	n := float64(b.N)
	b.ReportMetric(float64(processCPU(b)-m.proc)/n, "cpu-ns/op")
	b.ReportMetric(float64(redisCPU(b, m.client)-m.redisCPU)/n, "redis-cpu-ns/op")
}

// flushReceipts drains gw when it keeps receipts, so their writes are
// measured.
func flushReceipts(b *testing.B, gw *gateway.Server, rs receipts.Store) {
	if rs == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := gw.Drain(ctx); err != nil {
		b.Fatal(err)
	}
}

func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func redisCPU(b *testing.B, client *redis.Client) time.Duration {
	info, err := client.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for _, line := range strings.Split(info, "\r\n") {
		name, v, ok := strings.Cut(line, ":")
		if ok && (name == "used_cpu_sys" || name == "used_cpu_user") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatal(err)
			}
			total += f
		}
	}
	return time.Duration(total * float64(time.Second))
}
