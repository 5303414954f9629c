package reconcile_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/reconcile"
)

// countingKeeper is the embedded store with its budget reservations read
// through a counter: how often the worker asked for them.
type countingKeeper struct {
	budgetStore
	reads atomic.Int64
}

// budgetStore is a store the worker runs on that keeps budgets.
type budgetStore interface {
	testStore
	idempotency.BudgetKeeper
}

func (c *countingKeeper) Reservations(ctx context.Context, scope idempotency.Scope) ([]idempotency.Reservation, error) {
	c.reads.Add(1)
	return c.budgetStore.Reservations(ctx, scope)
}

var _ idempotency.BudgetKeeper = (*countingKeeper)(nil)

// A resolution reads the record's budget reservations only for a listener
// (Options.OnResolved, set when receipts are on), and hands them to it.
func TestReservationsAreReadOnlyForAListener(t *testing.T) {
	for _, listening := range []bool{false, true} {
		name := map[bool]string{false: "no listener", true: "listener"}[listening]
		t.Run(name, func(t *testing.T) {
			store := &countingKeeper{budgetStore: openStore(t)}
			if !store.KeepsBudgets() {
				t.Fatal("the embedded store keeps budgets; the test needs it to")
			}
			s := newSetupOn(t, answering(`{"outcome":"committed","status":200,"body":{}}`), store)
			req, _ := unknownRecord(t, s.store)
			var mu sync.Mutex
			var heard []idempotency.Record
			opts := reconcile.Options{Store: store, Targets: []reconcile.Target{s.target(t, 5, time.Second)},
				Owner: "replica-a", Registerer: prometheus.NewRegistry()}
			if listening {
				opts.OnResolved = func(rec idempotency.Record, status int, _ []idempotency.Reservation) {
					mu.Lock()
					defer mu.Unlock()
					heard = append(heard, rec)
				}
			}
			w, err := reconcile.New(opts)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); w.Run(ctx) }()
			t.Cleanup(func() { cancel(); <-done })
			eventually(t, "the record completed", func() bool {
				rec, ok := get(t, s.store, req.Scope)
				return ok && rec.State == idempotency.StateCompleted
			})
			cancel()
			<-done
			mu.Lock()
			defer mu.Unlock()
			reads := store.reads.Load()
			switch {
			case !listening && reads != 0:
				t.Fatalf("reservations read %d times with no listener, want 0", reads)
			case listening && (reads != 1 || len(heard) != 1 || heard[0].ExecutionID != req.ExecutionID):
				t.Fatalf("with a listener: reservations read %d times (want 1), heard %+v (want the record of %s)", reads, heard, req.ExecutionID)
			}
		})
	}
}
