package redisstore

import (
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// TestEffectRoundTripBudget: an effect adds one round trip to a fresh
// claim (the reservation) and none to a replay under the call's own key;
// Complete keeps the reservation in its own pipeline.
func TestEffectRoundTripBudget(t *testing.T) {
	client := testClient(t)
	counter := &roundTrips{}
	client.AddHook(counter)
	store := New(client, Options{Prefix: uniquePrefix(t, client)})
	ctx := t.Context()
	request := func(key string) idempotency.ClaimRequest {
		return idempotency.ClaimRequest{
			Scope:       idempotency.Scope{Tenant: "t", Tool: "tool", Key: key},
			Fingerprint: "fp", Step: &idempotency.Step{SessionID: "s-" + key, Index: 1}, StepGuard: true, StepBoundKey: true,
			ExecutionID: "exec-" + key, Owner: "owner-" + key,
			LockTTL: time.Minute, ReplayTTL: time.Hour, LeaseExpiry: idempotency.LeaseExpiryRerun,
			Effect: &idempotency.Effect{Value: "refund:" + key},
		}
	}
	resp := idempotency.StoredResponse{Status: 200, ContentType: "application/json", Body: []byte(`{}`)}
	warm, err := store.Claim(ctx, request("warm")) // load the scripts: the budget is for a warm server
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Complete(ctx, warm.Lease, resp, time.Hour); err != nil {
		t.Fatal(err)
	}
	req := request("key")
	var d idempotency.Decision
	claim := counter.cost(t, func() (err error) { d, err = store.Claim(ctx, req); return err })
	if d.Outcome != idempotency.OutcomeClaimed || d.Lease.Effect == nil {
		t.Fatalf("outcome %v, lease effect %v", d.Outcome, d.Lease.Effect)
	}
	complete := counter.cost(t, func() error { return store.Complete(ctx, d.Lease, resp, time.Hour) })
	replay := counter.cost(t, func() (err error) { d, err = store.Claim(ctx, req); return err })
	if d.Outcome != idempotency.OutcomeReplay {
		t.Fatalf("outcome %v", d.Outcome)
	}
	if claim != 2 || complete != 1 || replay != 1 {
		t.Errorf("claim %d round trips (want 2), complete %d (want 1), replay %d (want 1)", claim, complete, replay)
	}
	// The reservation outlives the completed record.
	recordTTL := client.PTTL(ctx, store.keys.record(req.Scope, req.Step)).Val()
	effectTTL := client.PTTL(ctx, store.keys.effect(req.Scope, req.Effect.Value)).Val()
	if recordTTL <= 0 || effectTTL <= recordTTL {
		t.Errorf("record ttl %v, reservation ttl %v: want the reservation to outlive the record", recordTTL, effectTTL)
	}
}
