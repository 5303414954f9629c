package boltstore

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// fakeClock is a manually advanced clock shared by a test and its store.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// openTestStore opens a store in a temp dir with the sweeper off and the
// given clock.
func openTestStore(t *testing.T, clock *fakeClock) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "gw.db"), Options{SweepInterval: -1, Now: clock.Now})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

var idCounter atomic.Int64

func newID(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, idCounter.Add(1))
}

// claimRequest is a typical request; tests override fields.
func claimRequest(key, fingerprint string, step *idempotency.Step) idempotency.ClaimRequest {
	return idempotency.ClaimRequest{
		Scope:       idempotency.Scope{Tenant: "acme", Tool: "provision", Key: key},
		Fingerprint: fingerprint,
		Step:        step,
		StepGuard:   true,
		ExecutionID: newID("exec"),
		Owner:       newID("owner"),
		LockTTL:     30 * time.Second,
		ReplayTTL:   24 * time.Hour,
		LeaseExpiry: idempotency.LeaseExpiryRerun,
	}
}

func mustClaim(t *testing.T, s *Store, req idempotency.ClaimRequest, want idempotency.Outcome) idempotency.Decision {
	t.Helper()
	d, err := s.Claim(context.Background(), req)
	if err != nil {
		t.Fatalf("Claim(%s): %v", req.Scope.Key, err)
	}
	if d.Outcome != want {
		t.Fatalf("Claim(%s) = %v, want %v (decision %+v)", req.Scope.Key, d.Outcome, want, d)
	}
	return d
}

// bucketSizes counts the entries of each bucket.
func (s *Store) bucketSizes(t *testing.T) (records, steps, counters int) {
	t.Helper()
	err := s.db.View(func(tx *bolt.Tx) error {
		records = tx.Bucket(recordsBucket).Stats().KeyN
		steps = tx.Bucket(stepsBucket).Stats().KeyN
		counters = tx.Bucket(fencingBucket).Stats().KeyN
		return nil
	})
	if err != nil {
		t.Fatalf("count buckets: %v", err)
	}
	return records, steps, counters
}
