package agentclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/agentclient"
	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/idempotency/redisstore"
	"github.com/toolgateway/toolgateway/internal/redistest"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// provisionTool is a real in-process tool that counts its executions and
// can be made slow.
type provisionTool struct {
	runs  atomic.Int64
	delay time.Duration
}

func (p *provisionTool) Spec() tools.Spec {
	return tools.Spec{Name: "provision", Description: "allocates a resource",
		InputSchema: json.RawMessage(`{"type":"object","required":["name"],"properties":{"name":{"type":"string"}}}`)}
}

func (p *provisionTool) Call(ctx context.Context, req *tools.Request) (*tools.Response, error) {
	n := p.runs.Add(1)
	select {
	case <-time.After(p.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return tools.JSON(201, map[string]any{"resource": n, "fencing_token": req.FencingToken})
}

// realGateway serves the real gateway on the real Redis.
func realGateway(t *testing.T, tool tools.Tool) string {
	t.Helper()
	client := redis.NewClient(&redis.Options{Addr: redistest.Addr(t)})
	prefix := redistest.Prefix("sdk-e2e")
	t.Cleanup(func() {
		redistest.CleanPrefix(context.Background(), client, prefix)
		_ = client.Close()
	})
	registry := tools.NewRegistry()
	if err := registry.Add(tool); err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.NewServer(callpath.Options{
		Store: redisstore.New(client, redisstore.Options{Prefix: prefix}),
		Tools: registry,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestCrashAndReplayAgainstTheRealGateway is the story the SDK exists for,
// end to end: a runtime calls step 4 and "crashes" before recording the
// result; a new process with the same session id replays step 4 and gets
// the recorded result — same execution id, the tool ran once.
func TestCrashAndReplayAgainstTheRealGateway(t *testing.T) {
	tool := &provisionTool{}
	url := realGateway(t, tool)
	ctx := t.Context()

	before := agentclient.New(url).Session("run-42")
	first, err := before.Call(ctx, 4, "provision", map[string]any{"name": "db"})
	if err != nil {
		t.Fatal(err)
	}
	// ...crash; a new process restores session "run-42" at step 4.
	after := agentclient.New(url).Session("run-42")
	again, err := after.Call(ctx, 4, "provision", json.RawMessage(`{ "name" : "db" }`))
	if err != nil {
		t.Fatal(err)
	}
	if first.Replayed || !again.Replayed || again.ExecutionID != first.ExecutionID || string(again.Body) != string(first.Body) || again.Status != 201 {
		t.Fatalf("first %+v\nagain %+v", first, again)
	}
	if first.Key != again.Key {
		t.Fatalf("keys differ: %s / %s", first.Key, again.Key)
	}
	if n := tool.runs.Load(); n != 1 {
		t.Fatalf("tool ran %d times", n)
	}

	// Another call in the same step is refused, naming the first call.
	_, err = after.Call(ctx, 4, "provision", map[string]any{"name": "cache"})
	var perr *agentclient.Error
	if !errors.As(err, &perr) || perr.Status != 422 || perr.Code != wire.CodeStepConflict || perr.ExecutionID != first.ExecutionID {
		t.Fatalf("step conflict: %v", err)
	}
	// Said once, naming the earlier call (the title and detail used to both appear).
	if msg := err.Error(); strings.Count(msg, "already made another call") != 1 || !strings.HasSuffix(msg, "(earlier call: tool provision, execution "+first.ExecutionID+")") {
		t.Fatalf("step conflict message: %q", msg)
	}
	// Invalid arguments come back as a 400 with the location.
	_, err = after.Call(ctx, 5, "provision", map[string]any{"name": 7})
	if !errors.As(err, &perr) || perr.Status != 400 || perr.Code != wire.CodeInvalidArguments {
		t.Fatalf("invalid arguments: %v", err)
	}
}

// TestReplayWhileRunningWaitsForTheOutcome: a replay that arrives while the
// original call still runs is held by the gateway (the SDK sends Prefer:
// wait by default) and answered with the outcome as soon as it exists, in
// one attempt; without Prefer it gets 409 request_in_progress and retries
// after Retry-After. Either way the tool runs once.
func TestReplayWhileRunningWaitsForTheOutcome(t *testing.T) {
	for _, tc := range []struct {
		name     string
		opts     []agentclient.Option
		attempts func(int) bool
	}{
		{"prefer wait (default)", nil, func(n int) bool { return n == 1 }},
		{"no prefer wait", []agentclient.Option{agentclient.WithPreferWait(0)}, func(n int) bool { return n >= 2 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tool := &provisionTool{delay: 1500 * time.Millisecond}
			url := realGateway(t, tool)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			done := make(chan *agentclient.Result, 1)
			go func() {
				r, err := agentclient.New(url).Session("slow").Call(ctx, 1, "provision", map[string]any{"name": "vm"})
				if err != nil {
					t.Error(err)
				}
				done <- r
			}()
			// Wait until the original call is running before sending the duplicate.
			for tool.runs.Load() == 0 {
				time.Sleep(10 * time.Millisecond)
			}
			replay, err := agentclient.New(url, tc.opts...).Session("slow").Call(ctx, 1, "provision", map[string]any{"name": "vm"})
			if err != nil {
				t.Fatal(err)
			}
			original := <-done
			if original == nil || !tc.attempts(replay.Attempts) || !replay.Replayed || replay.ExecutionID != original.ExecutionID {
				t.Fatalf("replay %+v (original %+v)", replay, original)
			}
			if n := tool.runs.Load(); n != 1 {
				t.Fatalf("tool ran %d times", n)
			}
		})
	}
}
