package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/idempotency/pgstore"
	"github.com/toolgateway/toolgateway/gateway/ratelimit"
	"github.com/toolgateway/toolgateway/internal/pgtest"
	"github.com/toolgateway/toolgateway/internal/redistest"
)

func TestParseRate(t *testing.T) {
	for in, want := range map[string]ratelimit.Limit{
		"100/s": {Rate: 100, Period: time.Second, Burst: 100},
		"5/m":   {Rate: 5, Period: time.Minute, Burst: 5},
		"1/h":   {Rate: 1, Period: time.Hour, Burst: 1},
	} {
		got, err := ratelimit.ParseRate(in)
		if err != nil || got != want {
			t.Errorf("ParseRate(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "100", "100/d", "0/s", "-1/s", "+1/s", "01/s", "1.5/s", "x/s", "100/ s"} {
		if _, err := ratelimit.ParseRate(bad); err == nil {
			t.Errorf("ParseRate(%q) accepted", bad)
		}
	}
}

// TestMemoryGCRA walks the in-process GCRA on a fake clock: the burst
// passes at once, then one call per emission interval, and RetryAfter says
// when the next one passes.
func TestMemoryGCRA(t *testing.T) {
	now := time.Unix(1000, 0)
	m := ratelimit.NewMemory(func() time.Time { return now })
	ctx := context.Background()
	l := ratelimit.Limit{Rate: 10, Period: time.Second, Burst: 3} // one per 100 ms
	allow := func() ratelimit.Verdict {
		v, err := m.Allow(ctx, "acme", l)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for i := range 3 {
		if !allow().Allowed {
			t.Fatalf("call %d of the burst refused", i)
		}
	}
	v := allow()
	if v.Allowed || v.RetryAfter != 100*time.Millisecond {
		t.Fatalf("over the burst: %+v, want refused with RetryAfter 100ms", v)
	}
	if v, _ := m.Allow(ctx, "globex", l); !v.Allowed {
		t.Fatal("another tenant shares acme's budget")
	}
	now = now.Add(100 * time.Millisecond)
	if !allow().Allowed {
		t.Fatal("refused after one emission interval")
	}
	if allow().Allowed {
		t.Fatal("two calls passed in one emission interval")
	}
	now = now.Add(time.Hour)
	for i := range 3 {
		if !allow().Allowed {
			t.Fatalf("after a long pause, call %d of a fresh burst refused", i)
		}
	}
}

// newPostgres returns the Backend of a PostgreSQL store in a schema of the
// test's own (dropped when it ends).
func newPostgres(t testing.TB) ratelimit.Backend {
	url := pgtest.URL(t)
	pool, err := pgxpool.New(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := pgstore.New(t.Context(), pool, pgstore.Options{Schema: pgtest.Schema(t, url), SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s.Limiter()
}

// backends runs f against Memory, Redis and PostgreSQL.
func backends(t *testing.T, f func(t *testing.T, b ratelimit.Backend)) {
	t.Run("postgres", func(t *testing.T) { f(t, newPostgres(t)) })
	t.Run("memory", func(t *testing.T) { f(t, ratelimit.NewMemory(nil)) })
	t.Run("redis", func(t *testing.T) {
		client := redis.NewClient(&redis.Options{Addr: redistest.Addr(t)})
		prefix := redistest.Prefix("rltest")
		b := ratelimit.NewRedis(client, prefix)
		t.Cleanup(func() {
			redistest.CleanPrefix(context.Background(), client, prefix)
			client.Del(context.Background(), b.RateKey("acme"), b.RateKey("globex"))
			_ = client.Close()
		})
		f(t, b)
	})
}

// TestInvalidLimitIsRefused: every backend refuses a limit it cannot
// enforce with ErrInvalidLimit, and counts nothing.
func TestInvalidLimitIsRefused(t *testing.T) {
	backends(t, func(t *testing.T, b ratelimit.Backend) {
		ctx := context.Background()
		for _, l := range []ratelimit.Limit{
			{Rate: 0, Period: time.Second, Burst: 1},
			{Rate: 1, Period: 0, Burst: 1},
			{Rate: 1, Period: time.Second, Burst: 0},
		} {
			if v, err := b.Allow(ctx, "acme", l); !errors.Is(err, ratelimit.ErrInvalidLimit) || v.Allowed {
				t.Errorf("Allow(%+v) = %+v, %v, want ErrInvalidLimit", l, v, err)
			}
		}
		l := ratelimit.Limit{Rate: 1, Period: time.Hour, Burst: 1}
		if v, err := b.Allow(ctx, "acme", l); err != nil || !v.Allowed {
			t.Errorf("first valid call after the refusals: %+v, %v, want allowed (nothing counted)", v, err)
		}
	})
}

func TestBurstThenRefusal(t *testing.T) {
	backends(t, func(t *testing.T, b ratelimit.Backend) {
		ctx := context.Background()
		l := ratelimit.Limit{Rate: 2, Period: time.Hour, Burst: 4} // a token per 30 min
		for i := range 4 {
			if v, err := b.Allow(ctx, "acme", l); err != nil || !v.Allowed {
				t.Fatalf("call %d of the burst: %+v, %v", i, v, err)
			}
		}
		v, err := b.Allow(ctx, "acme", l)
		if err != nil || v.Allowed {
			t.Fatalf("over the burst: %+v, %v", v, err)
		}
		if v.RetryAfter <= 29*time.Minute || v.RetryAfter > 30*time.Minute {
			t.Fatalf("RetryAfter %v, want just under 30m", v.RetryAfter)
		}
	})
}

func TestInFlightSlots(t *testing.T) {
	backends(t, func(t *testing.T, b ratelimit.Backend) {
		ctx := context.Background()
		take := func(holder string) bool {
			ok, err := b.Acquire(ctx, "acme", holder, 2, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		if !take("a") || !take("b") {
			t.Fatal("the first two slots were refused")
		}
		if !take("a") {
			t.Fatal("a holder that has a slot was refused it again")
		}
		if take("c") {
			t.Fatal("a third slot was given with max 2")
		}
		if ok, _ := b.Acquire(ctx, "globex", "c", 2, time.Minute); !ok {
			t.Fatal("another tenant is limited by acme's slots")
		}
		if err := b.Renew(ctx, "acme", "a", time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := b.Release(ctx, "acme", "a"); err != nil {
			t.Fatal(err)
		}
		if !take("c") {
			t.Fatal("a released slot was not given again")
		}
	})
}

// TestSlotOfADeadHolderExpires: a replica that dies without releasing
// frees its slot when the lease ends (the shared store's clock decides).
func TestSlotOfADeadHolderExpires(t *testing.T) {
	t.Run("redis", func(t *testing.T) {
		client := redis.NewClient(&redis.Options{Addr: redistest.Addr(t)})
		prefix := redistest.Prefix("rltest")
		t.Cleanup(func() {
			redistest.CleanPrefix(context.Background(), client, prefix)
			_ = client.Close()
		})
		deadHolderExpires(t, ratelimit.NewRedis(client, prefix))
	})
	t.Run("postgres", func(t *testing.T) { deadHolderExpires(t, newPostgres(t)) })
}

func deadHolderExpires(t *testing.T, b ratelimit.Backend) {
	ctx := context.Background()
	if ok, err := b.Acquire(ctx, "acme", "dead", 1, 50*time.Millisecond); err != nil || !ok {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	if ok, _ := b.Acquire(ctx, "acme", "alive", 1, time.Minute); ok {
		t.Fatal("a second slot with max 1")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		ok, err := b.Acquire(ctx, "acme", "alive", 1, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the dead holder's slot never expired")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestConcurrentCallsShareOneBudget fires many calls of one tenant at once
// (as replicas do): exactly the burst passes, and exactly max of many
// concurrent holders get a slot; no decision is lost to a race.
func TestConcurrentCallsShareOneBudget(t *testing.T) {
	backends(t, func(t *testing.T, b ratelimit.Backend) {
		const burst, maxSlots, calls = 5, 3, 40
		l := ratelimit.Limit{Rate: 1, Period: time.Hour, Burst: burst}
		var allowed, slots atomic.Int64
		var wg sync.WaitGroup
		for i := range calls {
			wg.Go(func() {
				v, err := b.Allow(t.Context(), "acme", l)
				if err != nil {
					t.Error(err)
					return
				}
				if v.Allowed {
					allowed.Add(1)
				} else if v.RetryAfter <= 0 || v.RetryAfter > time.Hour {
					t.Errorf("refusal with RetryAfter %v", v.RetryAfter)
				}
				ok, err := b.Acquire(t.Context(), "acme", fmt.Sprintf("holder-%d", i), maxSlots, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					slots.Add(1)
				}
			})
		}
		wg.Wait()
		if allowed.Load() != burst || slots.Load() != maxSlots {
			t.Fatalf("%d calls allowed and %d slots given; want %d and %d", allowed.Load(), slots.Load(), burst, maxSlots)
		}
	})
}
