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

// TestEffectTakeJudgedStaleStays: a reservation whose holder was deleted
// is stale; once the holder's own key is claimed again, the new claim
// takes the reservation under its own owner token, so a sweep (or a
// compare and set) that judged the earlier take stale removes nothing.
func TestEffectTakeJudgedStaleStays(t *testing.T) {
	client := testClient(t)
	store := New(client, Options{Prefix: uniquePrefix(t, client), EffectSweepInterval: -1})
	t.Cleanup(func() { _ = store.Close() })
	ctx := t.Context()
	req := idempotency.ClaimRequest{
		Scope: idempotency.Scope{Tenant: "t", Tool: "tool", Key: "k"}, Fingerprint: "fp",
		ExecutionID: "exec-1", Owner: "owner-1", LockTTL: time.Minute, ReplayTTL: time.Hour,
		LeaseExpiry: idempotency.LeaseExpiryRerun, Effect: &idempotency.Effect{Value: "refund:1"},
	}
	effectKey := store.keys.effect(req.Scope, req.Effect.Value)
	if d, err := store.Claim(ctx, req); err != nil || d.Outcome != idempotency.OutcomeClaimed {
		t.Fatalf("claim: %v, %v", d.Outcome, err)
	}
	if err := store.Delete(ctx, req.Scope); err != nil {
		t.Fatal(err)
	}
	stale := client.Get(ctx, effectKey).Val()
	staleOwner, _, _ := cutTake(stale)
	again := req
	again.ExecutionID, again.Owner = "exec-2", "owner-2"
	if d, err := store.Claim(ctx, again); err != nil || d.Outcome != idempotency.OutcomeClaimed {
		t.Fatalf("claim again: %v, %v", d.Outcome, err)
	}
	// What a sweep that read the stale take before the claim would do.
	record := store.keys.record(req.Scope, nil)
	n, err := store.evalInt(ctx, call(effectDropScript, []string{effectKey}, effectDropArgs{Owner: staleOwner, Record: lenPrefixed(record)}))
	if err != nil || n != 0 {
		t.Fatalf("drop of the stale take = %d, %v; want 0 (the record took it again)", n, err)
	}
	if removed, err := store.SweepEffects(ctx); err != nil || removed != 0 {
		t.Fatalf("sweep removed %d, %v; want 0 (a live holder)", removed, err)
	}
	other := req
	other.Scope.Key, other.ExecutionID, other.Owner = "k2", "exec-3", "owner-3"
	if d, err := store.Claim(ctx, other); err != nil || d.Outcome != idempotency.OutcomeInProgress || !d.ByEffect {
		t.Fatalf("another key for the held effect: %v, %v; want in progress by effect", d.Outcome, err)
	}
}

// TestEffectReservationOfAnEarlierBuild: a reservation an earlier build
// wrote (the bare holder identity, with a TTL) is read as before, and the
// holder's completion makes it live as long as the holder.
func TestEffectReservationOfAnEarlierBuild(t *testing.T) {
	client := testClient(t)
	store := New(client, Options{Prefix: uniquePrefix(t, client), EffectSweepInterval: -1})
	t.Cleanup(func() { _ = store.Close() })
	ctx := t.Context()
	req := idempotency.ClaimRequest{
		Scope: idempotency.Scope{Tenant: "t", Tool: "tool", Key: "k"}, Fingerprint: "fp",
		ExecutionID: "exec-1", Owner: "owner-1", LockTTL: time.Minute, ReplayTTL: time.Hour,
		LeaseExpiry: idempotency.LeaseExpiryRerun, Effect: &idempotency.Effect{Value: "refund:1"},
	}
	d, err := store.Claim(ctx, req)
	if err != nil || d.Outcome != idempotency.OutcomeClaimed {
		t.Fatalf("claim: %v, %v", d.Outcome, err)
	}
	effectKey := store.keys.effect(req.Scope, req.Effect.Value)
	identity := effectHolder{record: store.keys.record(req.Scope, nil), fingerprint: req.Fingerprint}.encode()
	client.Set(ctx, effectKey, identity, time.Minute) // as an earlier build wrote it
	other := req
	other.Scope.Key, other.ExecutionID, other.Owner = "k2", "exec-2", "owner-2"
	if d, err := store.Claim(ctx, other); err != nil || d.Outcome != idempotency.OutcomeInProgress || !d.ByEffect || d.ExecutionID != "exec-1" {
		t.Fatalf("another key for the held effect: %+v, %v; want in progress by effect of exec-1", d, err)
	}
	lease := idempotency.Lease{Scope: req.Scope, Owner: req.Owner, FencingToken: 0, ExecutionID: req.ExecutionID, Effect: req.Effect}
	claimed, err := store.Claim(ctx, req) // the same claim again: its lease
	if err != nil || claimed.Outcome != idempotency.OutcomeClaimed {
		t.Fatalf("same claim again: %v, %v", claimed.Outcome, err)
	}
	lease.FencingToken = claimed.Lease.FencingToken
	if err := store.Complete(ctx, lease, idempotency.StoredResponse{Status: 200}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if ttl := client.PTTL(ctx, effectKey).Val(); ttl != -1 {
		t.Errorf("reservation ttl %v after the holder's completion, want none (-1)", ttl)
	}
}
