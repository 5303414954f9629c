package receipts_test

import (
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/toolgateway/toolgateway/gateway/receipts"
	"github.com/toolgateway/toolgateway/gateway/receipts/boltreceipts"
)

// TestSchedulerSignsAfterTheInterval: with an interval alone, a chain
// with new receipts is signed once the interval since the first of them
// passed, and a chain without new receipts is not signed again.
func TestSchedulerSignsAfterTheInterval(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "r.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	inner, err := boltreceipts.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	sched := receipts.NewScheduler(receipts.Checkpointer{Store: inner, Key: testKey(1)}, 0, 100*time.Millisecond, nil)
	store := sched.Store(inner)
	go sched.Run(t.Context())
	for i := range 3 {
		r := sample(i)
		r.Event = receipts.EventDenied // sample's execution id repeats
		if _, err := store.Append(t.Context(), "acme", r); err != nil {
			t.Fatal(err)
		}
	}
	var signed []receipts.Checkpoint
	for deadline := time.Now().Add(10 * time.Second); len(signed) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no checkpoint 10 s after the receipts")
		}
		if signed, err = inner.Checkpoints(t.Context(), "acme"); err != nil {
			t.Fatal(err)
		}
	}
	if signed[0].Seq != 3 || keysOf(testKey(1)).Check(signed[0]) != nil {
		t.Fatalf("checkpoint %+v, want a signed seq 3", signed[0])
	}
	now, err := sched.Now(t.Context(), "")
	if err != nil || len(now) != 1 || now[0].Seq != 3 {
		t.Fatalf("Now: %+v %v", now, err)
	}
	if all, _ := inner.Checkpoints(t.Context(), "acme"); len(all) != 1 {
		t.Fatalf("%d checkpoints of one head, want 1", len(all))
	}
}
