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
	// The reservation has no TTL: it lives as long as its holder, however
	// long a resolve or a reconciliation later makes the record live.
	recordTTL := client.PTTL(ctx, store.keys.record(req.Scope, req.Step)).Val()
	effectTTL := client.PTTL(ctx, store.keys.effect(req.Scope, req.Effect.Value)).Val()
	if recordTTL <= 0 || effectTTL != -1 {
		t.Errorf("record ttl %v, reservation ttl %v: want the reservation without a TTL (-1)", recordTTL, effectTTL)
	}
}

// TestEffectReservationRemovedOnlyWithItsHolder: a release removes the
// reservation after its record; a deleted or expired holder leaves one
// that the sweep removes; a live holder's reservation is never swept.
func TestEffectReservationRemovedOnlyWithItsHolder(t *testing.T) {
	client := testClient(t)
	store := New(client, Options{Prefix: uniquePrefix(t, client), EffectSweepInterval: -1})
	t.Cleanup(func() { _ = store.Close() })
	ctx := t.Context()
	request := func(key string, replay time.Duration) idempotency.ClaimRequest {
		return idempotency.ClaimRequest{
			Scope:       idempotency.Scope{Tenant: "t", Tool: "tool", Key: key},
			Fingerprint: "fp", ExecutionID: "exec-" + key, Owner: "owner-" + key,
			LockTTL: time.Minute, ReplayTTL: replay, LeaseExpiry: idempotency.LeaseExpiryRerun,
			Effect: &idempotency.Effect{Value: "refund:" + key},
		}
	}
	exists := func(req idempotency.ClaimRequest) bool {
		return client.Exists(ctx, store.keys.effect(req.Scope, req.Effect.Value)).Val() == 1
	}
	claim := func(req idempotency.ClaimRequest) idempotency.Lease {
		d, err := store.Claim(ctx, req)
		if err != nil || d.Outcome != idempotency.OutcomeClaimed {
			t.Fatalf("claim %s: %v, %v", req.Scope.Key, d.Outcome, err)
		}
		return d.Lease
	}
	released, deleted, expired, live := request("released", time.Hour), request("deleted", time.Hour), request("expired", time.Hour), request("live", time.Hour)
	if err := store.Release(ctx, claim(released)); err != nil {
		t.Fatal(err)
	}
	if exists(released) {
		t.Errorf("the released record's reservation is still there")
	}
	claim(deleted)
	if err := store.Delete(ctx, deleted.Scope); err != nil {
		t.Fatal(err)
	}
	lease := claim(expired)
	if err := store.Complete(ctx, lease, idempotency.StoredResponse{Status: 200}, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	claim(live)
	time.Sleep(200 * time.Millisecond) // the completed record expires
	if !exists(deleted) || !exists(expired) {
		t.Fatalf("want the reservations of the deleted and the expired holder until the sweep")
	}
	removed, err := store.SweepEffects(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if removed != 2 || exists(deleted) || exists(expired) || !exists(live) {
		t.Errorf("sweep removed %d; deleted %v expired %v live %v: want 2 removed, the live holder's kept",
			removed, exists(deleted), exists(expired), exists(live))
	}
}
