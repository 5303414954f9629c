package idempotency_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// TestSweeperSweepsUntilStop: the sweep runs again and again, and not once
// after Stop has returned; Stop ends a sweep under way through its context.
// On synctest's fake clock, the 20 ms after Stop are twenty intervals
// exactly.
func TestSweeperSweepsUntilStop(t *testing.T) {
	synctest.Test(t, sweepsUntilStop)
}

func sweepsUntilStop(t *testing.T) {
	var sweeps atomic.Int64
	twice := make(chan struct{})
	s := idempotency.StartSweeper(time.Millisecond, time.Hour, func(ctx context.Context) {
		if sweeps.Add(1) == 2 {
			close(twice)
		}
	})
	<-twice
	s.Stop()
	after := sweeps.Load()
	time.Sleep(20 * time.Millisecond)
	if n := sweeps.Load(); n != after {
		t.Fatalf("%d sweeps after Stop returned", n-after)
	}
	s.Stop() // twice is safe

	started := make(chan struct{})
	blocked := idempotency.StartSweeper(time.Millisecond, time.Hour, func(ctx context.Context) {
		select {
		case started <- struct{}{}:
		default:
		}
		<-ctx.Done() // a sweep that waits on its context
	})
	<-started
	blocked.Stop()
}

// TestSweeperNegativeIntervalNeverSweeps: a negative interval starts no
// sweeper, however long the clock (synctest's, fake) runs; Stop returns at
// once.
func TestSweeperNegativeIntervalNeverSweeps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sweeps atomic.Int64
		s := idempotency.StartSweeper(-1, time.Millisecond, func(context.Context) { sweeps.Add(1) })
		time.Sleep(time.Hour)
		s.Stop()
		if n := sweeps.Load(); n != 0 {
			t.Fatalf("%d sweeps with a negative interval, want 0", n)
		}
	})
}
