package boltstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// fillAdminBench writes n COMPLETED records of two tenants in one
// transaction (the admin scans' worst case: every record read).
func fillAdminBench(b *testing.B, s *Store, n int) {
	b.Helper()
	now := time.Now()
	err := s.db.Update(func(tx *bolt.Tx) error {
		t, err := newTxn(tx, now)
		if err != nil {
			return err
		}
		for i := range n {
			r := &storedRecord{
				Tenant: []string{"acme", "globex"}[i%2], Tool: "provision", Key: fmt.Sprintf("%064d", i),
				State: string(idempotency.StateCompleted), Fingerprint: fmt.Sprintf("%064x", i),
				ExecutionID: fmt.Sprintf("01JD3M7K9QXW2Y5N8B%08d", i), Fencing: int64(i + 1),
				CreatedAt: now.UnixNano(), ExpiresAt: now.Add(time.Hour).UnixNano(),
				Step:     &storedStep{SessionID: fmt.Sprintf("sess-%d", i/10), Index: uint64(i % 10)},
				Response: &storedResponse{Status: 200, ContentType: "application/json", Body: benchBody},
			}
			if err := t.putRecord(scopeKey(r.scope()), r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkAdmin measures the admin lookups on a file of 10 000 records:
// a page of 100, a filtered page (a state no record has: the scan budget
// decides) and FindExecution of the last record in key order.
func BenchmarkAdmin(b *testing.B) {
	const n = 10_000
	s := openBenchStore(b)
	fillAdminBench(b, s, n)
	ctx := context.Background()
	b.Run("list-page-100", func(b *testing.B) {
		for b.Loop() {
			if p, err := s.List(ctx, idempotency.ListFilter{Limit: 100}); err != nil || len(p.Records) != 100 {
				b.Fatal(len(p.Records), err)
			}
		}
	})
	b.Run("list-unknown-none-of-10000", func(b *testing.B) {
		for b.Loop() {
			if p, err := s.List(ctx, idempotency.ListFilter{State: idempotency.StateUnknown, Limit: 100}); err != nil || len(p.Records) != 0 {
				b.Fatal(len(p.Records), err)
			}
		}
	})
	b.Run("find-execution-10000", func(b *testing.B) {
		id := fmt.Sprintf("01JD3M7K9QXW2Y5N8B%08d", n-1)
		for b.Loop() {
			if _, err := s.FindExecution(ctx, id); err != nil {
				b.Fatal(err)
			}
		}
	})
}
