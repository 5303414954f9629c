package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/redis/go-redis/v9"
)

const localRedis = "127.0.0.1:6379"

// testClient connects to the shared local Redis, failing the test if it is
// not there.
func testClient(tb testing.TB) *redis.Client {
	tb.Helper()
	client := redis.NewClient(&redis.Options{Addr: localRedis})
	tb.Cleanup(func() { _ = client.Close() })
	if err := client.Ping(tb.Context()).Err(); err != nil {
		tb.Fatalf("local Redis at %s: %v", localRedis, err)
	}
	return client
}

// uniquePrefix returns a key prefix no other test uses, and deletes its
// keys when the test ends (the shared Redis is never flushed).
func uniquePrefix(tb testing.TB, client redis.UniversalClient) string {
	tb.Helper()
	var random [8]byte
	if _, err := rand.Read(random[:]); err != nil {
		tb.Fatalf("random: %v", err)
	}
	prefix := "gwtest:" + hex.EncodeToString(random[:]) + ":"
	tb.Cleanup(func() { deletePrefix(tb, client, prefix) })
	return prefix
}

func deletePrefix(tb testing.TB, client redis.UniversalClient, prefix string) {
	ctx := context.Background() // the test's context is already cancelled
	iter := client.Scan(ctx, 0, prefix+"*", 500).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		tb.Errorf("scan %s*: %v", prefix, err)
		return
	}
	for _, key := range keys { // one by one: the keys span Cluster slots
		if err := client.Del(ctx, key).Err(); err != nil {
			tb.Errorf("del %s: %v", key, err)
		}
	}
}
