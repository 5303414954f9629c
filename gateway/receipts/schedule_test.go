package receipts_test

import (
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/toolgateway/toolgateway/gateway/receipts"
	"github.com/toolgateway/toolgateway/gateway/receipts/boltreceipts"
)

// TestSchedulerSignsAfterTheInterval: with an interval alone, a chain
// with new receipts is signed once the interval since the first of them
// passed, and a chain without new receipts is not signed again. The
// receipts live in a bbolt file, in the process: on synctest's fake clock
// the interval passes exactly, and synctest.Wait lets the scheduler finish
// what the passing interval started.
func TestSchedulerSignsAfterTheInterval(t *testing.T) {
	synctest.Test(t, schedulerSignsAfterTheInterval)
}

func schedulerSignsAfterTheInterval(t *testing.T) {
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
	synctest.Wait()
	if signed, err := inner.Checkpoints(t.Context(), "acme"); err != nil || len(signed) != 0 {
		t.Fatalf("checkpoints before the interval passed: %+v %v", signed, err)
	}
	time.Sleep(100 * time.Millisecond)
	synctest.Wait()
	signed, err := inner.Checkpoints(t.Context(), "acme")
	if err != nil || len(signed) == 0 {
		t.Fatalf("no checkpoint once the interval passed: %+v %v", signed, err)
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
