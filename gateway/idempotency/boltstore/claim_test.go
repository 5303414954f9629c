package boltstore

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

func openBenchStore(b *testing.B) *Store {
	b.Helper()
	s, err := Open(filepath.Join(b.TempDir(), "gw.db"), Options{SweepInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

var benchBody = []byte(`{"id":"vm-12345","region":"eu-west-1","status":"provisioned","ip":"10.0.0.7"}`)

// BenchmarkClaimComplete measures a fresh call: Claim (one fsync) and
// Complete (another fsync).
func BenchmarkClaimComplete(b *testing.B) {
	s := openBenchStore(b)
	ctx := context.Background()
	i := 0
	for b.Loop() {
		i++
		d, err := s.Claim(ctx, idempotency.ClaimRequest{
			Scope:       idempotency.Scope{Tenant: "acme", Tool: "provision", Key: fmt.Sprintf("key-%d", i)},
			Fingerprint: "fp", Step: &idempotency.Step{SessionID: "bench", Index: uint64(i)}, StepGuard: true,
			ExecutionID: "exec", Owner: "owner", LockTTL: 30 * time.Second, ReplayTTL: 24 * time.Hour,
		})
		if err != nil || d.Outcome != idempotency.OutcomeClaimed {
			b.Fatalf("Claim = %v, %v", d.Outcome, err)
		}
		if err := s.Complete(ctx, d.Lease, idempotency.StoredResponse{Status: 200, ContentType: "application/json", Body: benchBody}, 24*time.Hour); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReplay measures a retried call answered from a COMPLETED record.
func BenchmarkReplay(b *testing.B) {
	s := openBenchStore(b)
	ctx := context.Background()
	req := idempotency.ClaimRequest{
		Scope:       idempotency.Scope{Tenant: "acme", Tool: "provision", Key: "replayed"},
		Fingerprint: "fp", ExecutionID: "exec", Owner: "owner",
		LockTTL: 30 * time.Second, ReplayTTL: 24 * time.Hour,
	}
	d, err := s.Claim(ctx, req)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Complete(ctx, d.Lease, idempotency.StoredResponse{Status: 200, ContentType: "application/json", Body: benchBody}, 24*time.Hour); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		d, err := s.Claim(ctx, req)
		if err != nil || d.Outcome != idempotency.OutcomeReplay {
			b.Fatalf("Claim = %v, %v", d.Outcome, err)
		}
	}
}

// BenchmarkClaimCompleteParallel measures fresh calls from 32 concurrent
// requests (b.SetParallelism per CPU): with group commit their claims and
// completions share fsyncs.
func BenchmarkClaimCompleteParallel(b *testing.B) {
	s := openBenchStore(b)
	ctx := context.Background()
	var next atomic.Int64
	b.SetParallelism(max(1, 32/runtime.GOMAXPROCS(0)))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1)
			d, err := s.Claim(ctx, idempotency.ClaimRequest{
				Scope:       idempotency.Scope{Tenant: "acme", Tool: "provision", Key: fmt.Sprintf("key-%d", i)},
				Fingerprint: "fp", Step: &idempotency.Step{SessionID: "bench", Index: uint64(i)}, StepGuard: true,
				ExecutionID: "exec", Owner: "owner", LockTTL: 30 * time.Second, ReplayTTL: 24 * time.Hour,
			})
			if err != nil || d.Outcome != idempotency.OutcomeClaimed {
				b.Errorf("Claim = %v, %v", d.Outcome, err)
				return
			}
			if err := s.Complete(ctx, d.Lease, idempotency.StoredResponse{Status: 200, ContentType: "application/json", Body: benchBody}, 24*time.Hour); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
