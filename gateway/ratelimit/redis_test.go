package ratelimit_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/ratelimit"
	"github.com/toolgateway/toolgateway/internal/redistest"
)

// BenchmarkAllow is the cost of one rate check per backend, sequential
// (one caller, so it is the round trip): docs/performance.md quotes it.
// The limit is never reached, so every call is an allowed decision.
func BenchmarkAllow(b *testing.B) {
	l := ratelimit.Limit{Rate: 1 << 30, Period: time.Second, Burst: 1 << 30}
	run := func(b *testing.B, be ratelimit.Backend) {
		for i := 0; b.Loop(); i++ {
			if v, err := be.Allow(b.Context(), "bench", l); err != nil || !v.Allowed {
				b.Fatalf("%+v %v", v, err)
			}
		}
	}
	b.Run("memory", func(b *testing.B) { run(b, ratelimit.NewMemory(nil)) })
	b.Run("redis", func(b *testing.B) {
		client := redis.NewClient(&redis.Options{Addr: redistest.Addr(b)})
		prefix := redistest.Prefix("rlbench")
		be := ratelimit.NewRedis(client, prefix)
		b.Cleanup(func() {
			client.Del(b.Context(), be.RateKey("bench"))
			_ = client.Close()
		})
		run(b, be)
	})
	b.Run("postgres", func(b *testing.B) { run(b, newPostgres(b)) })
}

// BenchmarkSlot is one in-flight slot taken and given back (two round
// trips on a shared store).
func BenchmarkSlot(b *testing.B) {
	run := func(b *testing.B, be ratelimit.Backend) {
		for i := 0; b.Loop(); i++ {
			holder := strconv.Itoa(i)
			if ok, err := be.Acquire(b.Context(), "bench", holder, 4, time.Minute); err != nil || !ok {
				b.Fatalf("%v %v", ok, err)
			}
			if err := be.Release(b.Context(), "bench", holder); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("memory", func(b *testing.B) { run(b, ratelimit.NewMemory(nil)) })
	b.Run("redis", func(b *testing.B) {
		client := redis.NewClient(&redis.Options{Addr: redistest.Addr(b)})
		prefix := redistest.Prefix("rlbench")
		be := ratelimit.NewRedis(client, prefix)
		b.Cleanup(func() {
			client.Del(b.Context(), be.InFlightKey("bench"))
			_ = client.Close()
		})
		run(b, be)
	})
	b.Run("postgres", func(b *testing.B) { run(b, newPostgres(b)) })
}
