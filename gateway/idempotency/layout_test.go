package idempotency

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestLayoutGuard: the guard reads the version at most once per
// LayoutRefresh, refuses a newer one with a *LayoutError naming both
// versions, and refuses (without caching) when the read fails. On
// synctest's fake clock the refresh is exact: a nanosecond before it the
// guard still answers from its last read.
func TestLayoutGuard(t *testing.T) {
	synctest.Test(t, layoutGuard)
}

func layoutGuard(t *testing.T) {
	var version, reads atomic.Int64
	version.Store(2)
	failing := errors.New("store down")
	var fail atomic.Bool
	g := NewLayoutGuard("redis", 2, func(context.Context) (int, error) {
		reads.Add(1)
		if fail.Load() {
			return 0, failing
		}
		return int(version.Load()), nil
	})
	ctx := t.Context()
	for range 50 {
		if err := g.Check(ctx); err != nil {
			t.Fatalf("known layout: %v", err)
		}
	}
	if n := reads.Load(); n != 1 {
		t.Fatalf("%d reads within one refresh, want 1", n)
	}
	version.Store(3)
	time.Sleep(LayoutRefresh - time.Nanosecond)
	if err := g.Check(ctx); err != nil || reads.Load() != 1 {
		t.Fatalf("a nanosecond before the refresh: %v after %d reads, want the cached verdict after 1", err, reads.Load())
	}
	time.Sleep(time.Nanosecond)
	err := g.Check(ctx)
	var layoutErr *LayoutError
	if !errors.As(err, &layoutErr) || !errors.Is(err, ErrNewerLayout) || layoutErr.Found != 3 || layoutErr.Known != 2 {
		t.Fatalf("newer layout: %v, want a LayoutError 3 > 2", err)
	}
	if want := "redis store layout version 3, this gateway knows up to 2"; err.Error()[:len(want)] != want {
		t.Fatalf("message %q", err)
	}
	fail.Store(true)
	time.Sleep(LayoutRefresh)
	if err := g.Check(ctx); !errors.Is(err, failing) {
		t.Fatalf("failed read: %v, want the read's error", err)
	}
	fail.Store(false)
	version.Store(2)
	if err := g.Check(ctx); err != nil {
		t.Fatalf("after the store answers again: %v", err)
	}
}
