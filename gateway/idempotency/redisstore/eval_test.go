package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/internal/redistest"
)

// roundTrips counts what the client sends: each command outside a pipeline
// and each pipeline is one round trip.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.count(cmd)
		return next(ctx, cmd)
	}
}

func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 {
			r.count(cmds[0])
		}
		return next(ctx, cmds)
	}
}

// count counts a command or pipeline, but not the handshake of a new pooled
// connection (go-redis sends it through the same hooks, and when it dials
// is its pool's business, not a cost of the operation measured).
func (r *roundTrips) count(first redis.Cmder) {
	switch first.Name() {
	case "hello", "auth", "client", "select", "readonly":
	default:
		r.n.Add(1)
	}
}

// cost returns how many round trips op took.
func (r *roundTrips) cost(t *testing.T, op func() error) int64 {
	t.Helper()
	before := r.n.Load()
	if err := op(); err != nil {
		t.Fatal(err)
	}
	return r.n.Load() - before
}

func TestRoundTripBudget(t *testing.T) {
	client := testClient(t)
	counter := &roundTrips{}
	client.AddHook(counter)
	store := New(client, Options{Prefix: uniquePrefix(t, client)})
	ctx := t.Context()

	request := func(key string, step *idempotency.Step) idempotency.ClaimRequest {
		return idempotency.ClaimRequest{
			Scope:       idempotency.Scope{Tenant: "t", Tool: "tool", Key: key},
			Fingerprint: "fp", Step: step, StepGuard: step != nil,
			ExecutionID: "exec-" + key, Owner: "owner-" + key,
			LockTTL: time.Minute, ReplayTTL: time.Hour, LeaseExpiry: idempotency.LeaseExpiryRerun,
		}
	}
	resp := idempotency.StoredResponse{Status: 200, ContentType: "application/json", Body: []byte(`{}`)}

	for i, step := range []*idempotency.Step{nil, {SessionID: "session", Index: 1}} {
		// Load the scripts first: the budget is for a warm server.
		warm, err := store.Claim(ctx, request(fmt.Sprintf("warm-%d", i), step))
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Renew(ctx, warm.Lease, time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := store.Complete(ctx, warm.Lease, resp, time.Hour); err != nil {
			t.Fatal(err)
		}

		req := request(fmt.Sprintf("key-%d", i), step)
		if step != nil {
			step.Index++ // the warm-up holds the first step
		}
		var d idempotency.Decision
		claim := counter.cost(t, func() (err error) { d, err = store.Claim(ctx, req); return err })
		if d.Outcome != idempotency.OutcomeClaimed {
			t.Fatalf("outcome %v", d.Outcome)
		}
		renew := counter.cost(t, func() error { return store.Renew(ctx, d.Lease, time.Minute) })
		complete := counter.cost(t, func() error { return store.Complete(ctx, d.Lease, resp, time.Hour) })
		replay := counter.cost(t, func() (err error) { d, err = store.Claim(ctx, req); return err })
		if d.Outcome != idempotency.OutcomeReplay {
			t.Fatalf("outcome %v", d.Outcome)
		}
		if claim+complete != 2 || replay != 1 || renew != 1 {
			t.Errorf("step %v: claim %d + complete %d round trips (want 2), replay %d (want 1), renew %d (want 1)",
				step != nil, claim, complete, replay, renew)
		}
	}
}

func TestRedisOutage(t *testing.T) {
	server := redistest.Start(t)
	// Fail fast while the server is down (the test is about the error, not
	// retries), but retry once, as a real client would, on a pooled
	// connection the restart broke.
	client := redis.NewClient(&redis.Options{Addr: server.Addr, MaxRetries: 1, DialerRetries: 1, DialTimeout: time.Second})
	t.Cleanup(func() { _ = client.Close() })
	store := New(client, Options{})
	ctx := t.Context()
	request := func(key string) idempotency.ClaimRequest {
		return idempotency.ClaimRequest{
			Scope:       idempotency.Scope{Tenant: "t", Tool: "tool", Key: key},
			Fingerprint: "fp", Step: &idempotency.Step{SessionID: "s-" + key, Index: 0}, StepGuard: true,
			ExecutionID: "exec-" + key, Owner: "owner-" + key,
			LockTTL: time.Minute, ReplayTTL: time.Hour, LeaseExpiry: idempotency.LeaseExpiryRerun,
		}
	}
	before, err := store.Claim(ctx, request("before")) // the server now caches the scripts
	if err != nil || before.Outcome != idempotency.OutcomeClaimed {
		t.Fatalf("claim before the outage: %v, %v", before.Outcome, err)
	}

	server.Kill()
	for _, op := range []struct {
		name string
		err  error
	}{
		{"Claim", func() error { _, err := store.Claim(ctx, request("down")); return err }()},
		{"Complete", store.Complete(ctx, before.Lease, idempotency.StoredResponse{Status: 200}, time.Hour)},
		{"Get", func() error { _, err := store.Get(ctx, before.Lease.Scope); return err }()},
		{"Ping", store.Ping(ctx)},
	} {
		if op.err == nil || errorsIsStoreVerdict(op.err) {
			t.Errorf("%s while Redis is down = %v, want a store error (not ErrLeaseLost/ErrNotFound)", op.name, op.err)
		}
	}

	// Empty (no persistence), and without the scripts: EVALSHA must fall back.
	if err := server.Restart(); err != nil {
		t.Fatal(err)
	}
	d, err := store.Claim(ctx, request("after"))
	if err != nil || d.Outcome != idempotency.OutcomeClaimed {
		t.Fatalf("claim after the restart: %v, %v", d.Outcome, err)
	}
	if err := store.Renew(ctx, d.Lease, time.Minute); err != nil {
		t.Fatalf("renew after the restart: %v", err)
	}
	if err := store.Complete(ctx, d.Lease, idempotency.StoredResponse{Status: 201, Body: []byte("ok")}, time.Hour); err != nil {
		t.Fatalf("complete after the restart: %v", err)
	}
	replay, err := store.Claim(ctx, request("after"))
	if err != nil || replay.Outcome != idempotency.OutcomeReplay || string(replay.Response.Body) != "ok" {
		t.Fatalf("replay after the restart: %+v, %v", replay, err)
	}
	// The record claimed before the outage died with the server's memory.
	if err := store.Complete(ctx, before.Lease, idempotency.StoredResponse{Status: 200}, time.Hour); !errors.Is(err, idempotency.ErrLeaseLost) {
		t.Errorf("completing a lease the restart lost = %v, want ErrLeaseLost", err)
	}
}

// errorsIsStoreVerdict reports whether err is one of the answers a working
// store gives, which the gateway must not confuse with an outage.
func errorsIsStoreVerdict(err error) bool {
	return errors.Is(err, idempotency.ErrLeaseLost) || errors.Is(err, idempotency.ErrNotFound)
}
