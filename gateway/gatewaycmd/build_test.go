package gatewaycmd

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

// TestRedisStoreCommandsEndAtTheirDeadline: a Redis that hangs instead of
// refusing (a frozen process: connections accepted, nothing answered) must
// not hold a store call past its context's deadline — the completion's
// window of max(5 s, lock_ttl) is one. The client's own read timeout is set
// to a minute here, so only the context can end the call in time.
func TestRedisStoreCommandsEndAtTheirDeadline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			defer conn.Close() // held open, never answered
		}
	}()
	cfg, err := ParseConfig([]byte("store:\n  redis_url: redis://" + ln.Addr().String() + "/0?read_timeout=60s&dial_timeout=60s\n"))
	if err != nil {
		t.Fatal(err)
	}
	client := cfg.redisClient()
	defer client.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- client.Ping(ctx).Err() }()
	select {
	case err := <-done:
		var netErr net.Error
		if err == nil || !(errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout()) {
			t.Fatalf("PING to a frozen Redis: %v, want its deadline's error", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("PING to a frozen Redis is still waiting 30 s after its 200 ms deadline: go-redis's read timeout, not the context, ends it")
	}
}
