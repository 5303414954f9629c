package redisreceipts_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/receipts"
	"github.com/toolgateway/toolgateway/gateway/receipts/receiptstest"
	"github.com/toolgateway/toolgateway/gateway/receipts/redisreceipts"
)

// roundTrips counts the commands and pipelines a client sends: one each
// is one round trip.
type roundTrips struct{ n atomic.Int64 }

func (c *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() != "hello" && cmd.Name() != "client" { // connection set-up
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (c *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmds)
	}
}

func receipt(i int) receipts.Receipt {
	return receipts.Receipt{
		Event: receipts.EventExecuted, Tool: "refund", Key: receipts.KeyHash(fmt.Sprint("key-", i)),
		Session: "session-1234", Step: "step-7", ExecutionID: fmt.Sprintf("01JEXAMPLEEXECUTIONID%05d", i), // one per execution: executed receipts are deduped
		Status: 201, Decision: "allow", Rule: "decide[0]",
		Policy: receipts.PolicyHash([]byte("policy")),
	}
}

// An append to a chain this process already appended to is one round
// trip (one EVALSHA); another replica's append in between costs one more.
func TestAppendRoundTrips(t *testing.T) {
	c, other := newClient(t), newClient(t)
	counter := &roundTrips{}
	c.AddHook(counter)
	prefix := newPrefix(t, c)
	s, o := redisreceipts.New(c, prefix, nil), redisreceipts.New(other, prefix, nil)
	if _, err := s.Append(t.Context(), "acme", receipt(0)); err != nil { // loads the script
		t.Fatal(err)
	}
	counter.n.Store(0)
	for i := range 10 {
		if _, err := s.Append(t.Context(), "acme", receipt(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	if n := counter.n.Load(); n != 10 {
		t.Errorf("10 appends took %d round trips, want 10", n)
	}
	if _, err := o.Append(t.Context(), "acme", receipt(99)); err != nil {
		t.Fatal(err)
	}
	counter.n.Store(0)
	if _, err := s.Append(t.Context(), "acme", receipt(100)); err != nil {
		t.Fatal(err)
	}
	if n := counter.n.Load(); n != 2 {
		t.Errorf("an append after another replica's took %d round trips, want 2", n)
	}
}

// BenchmarkAppend appends to one chain on the test Redis and reports the
// round trips per append and the memory a receipt takes in the chain's
// sorted set (MEMORY USAGE, exact).
func BenchmarkAppend(b *testing.B) {
	c := newClient(b)
	counter := &roundTrips{}
	c.AddHook(counter)
	prefix := newPrefix(b, c)
	s := redisreceipts.New(c, prefix, func() time.Time { return time.Date(2026, 12, 4, 10, 0, 0, 123456789, time.UTC) })
	ctx := context.Background()
	if _, err := s.Append(ctx, "acme", receipt(0)); err != nil {
		b.Fatal(err)
	}
	counter.n.Store(0)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		if _, err := s.Append(ctx, "acme", receipt(i)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(counter.n.Load())/float64(i), "roundtrips/op")
	log := prefix + "{receipts:acme}:log"
	used, err := c.MemoryUsage(ctx, log, 0).Result()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(used)/float64(i+1), "bytes/receipt")
}

// BenchmarkCheckpoint is one checkpoint of a chain on the test Redis, as
// the scheduler makes one every receipts.checkpoint_every receipts: read
// the head and the latest checkpoint, check the checkpointed receipt,
// sign, store. The receipt appended before each one is not timed; the
// round trips per checkpoint are reported.
func BenchmarkCheckpoint(b *testing.B) {
	c := newClient(b)
	counter := &roundTrips{}
	c.AddHook(counter)
	s := redisreceipts.New(c, newPrefix(b, c), nil)
	_, private, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	cp := receipts.Checkpointer{Store: s, Key: receipts.NewSigningKey(private)}
	ctx := context.Background()
	var trips int64
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if _, err := s.Append(ctx, "acme", receipt(i)); err != nil {
			b.Fatal(err)
		}
		before := counter.n.Load()
		b.StartTimer()
		if _, signed, err := cp.Checkpoint(ctx, "acme"); err != nil || !signed {
			b.Fatalf("checkpoint: signed %v, %v", signed, err)
		}
		trips += counter.n.Load() - before
	}
	b.ReportMetric(float64(trips)/float64(b.N), "roundtrips/op")
}

// prefixMemory is the sum of MEMORY USAGE (exact: SAMPLES 0) of every key
// under prefix.
func prefixMemory(t testing.TB, c redis.UniversalClient, prefix string) (total int64, byKey map[string]int64) {
	t.Helper()
	byKey = map[string]int64{}
	iter := c.Scan(t.Context(), 0, prefix+"*", 500).Iterator()
	for iter.Next(t.Context()) {
		used, err := c.MemoryUsage(t.Context(), iter.Val(), 0).Result()
		if err != nil {
			t.Fatal(err)
		}
		byKey[strings.TrimPrefix(iter.Val(), prefix)] = used
		total += used
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return total, byKey
}

// maxBytesPerReceipt is the bound of docs/receipts.md (fleet scale).
const maxBytesPerReceipt = 150

// TestMemoryPerReceipt measures the Redis memory an executed receipt
// keeps for the retention: every key of a private prefix (the log, its
// sealed segments, the executed index, the head and the listings), by
// MEMORY USAGE, after receiptsForMemory executed receipts of the
// shape of receiptstest.SizingReceipt (decision members included: ~520
// bytes of JSON), appended in the writer's runs of 16, once the executed index's
// hour has passed (an hourly expiry at a retention not reached): what
// every receipt but the last hour's costs. The figure is logged; the
// bound is docs/receipts.md's.
func TestMemoryPerReceipt(t *testing.T) {
	const receiptsForMemory = 20_000
	c := newClient(t)
	prefix := newPrefix(t, c)
	clock := newTestClock(time.Now())
	s := redisreceipts.New(c, prefix, clock.Now)
	receiptstest.AppendForSizing(t, s, "acme", receiptsForMemory)
	inWindow, byKey := prefixMemory(t, c, prefix)
	t.Logf("%d receipts within the executed index's hour: %d bytes, %.1f bytes per receipt; by key: %v",
		receiptsForMemory, inWindow, float64(inWindow)/receiptsForMemory, byKey)
	clock.Advance(61 * time.Minute)
	if n, err := s.Expire(t.Context(), clock.Now().Add(-receipts.DefaultRetention)); err != nil || n != 0 {
		t.Fatalf("Expire: %d, %v", n, err)
	}
	total, byKey := prefixMemory(t, c, prefix)
	perReceipt := float64(total) / receiptsForMemory
	t.Logf("%d receipts kept for the retention: %d bytes, %.1f bytes per receipt; by key: %v", receiptsForMemory, total, perReceipt, byKey)
	if perReceipt > maxBytesPerReceipt {
		t.Errorf("%.1f bytes of Redis memory per executed receipt, want at most %d", perReceipt, maxBytesPerReceipt)
	}
}
