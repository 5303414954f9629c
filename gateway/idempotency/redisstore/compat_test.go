package redisstore

import (
	"bytes"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// legacyWriter writes records exactly as a gateway of the previous layout
// did: its own claim and complete scripts (lua/legacy_*.lua), its key names.
type legacyWriter struct {
	t        *testing.T
	client   redis.UniversalClient
	keys     keyLayout
	claim    *redis.Script
	complete *redis.Script
}

func newLegacyWriter(t *testing.T, client redis.UniversalClient, s *Store) *legacyWriter {
	read := func(name string) *redis.Script {
		b, err := os.ReadFile("lua/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return redis.NewScript(string(b))
	}
	return &legacyWriter{t: t, client: client, keys: s.keys, claim: read("legacy_claim.lua"), complete: read("legacy_complete.lua")}
}

// claimed makes an old-layout IN_PROGRESS record with lock (and returns its fencing token).
func (w *legacyWriter) claimed(req idempotency.ClaimRequest) int64 {
	w.t.Helper()
	req.Step = w.keys.slotStep(req)
	keys := []string{w.keys.legacyRecord(req.Scope, req.Step)}
	if req.Step != nil {
		keys = append(keys, w.keys.legacyStep(req.Scope.Tenant, *req.Step))
	}
	reply, err := w.claim.Run(w.t.Context(), w.client, keys, req.Scope.Tenant, req.Scope.Tool, req.Scope.Key, req.Fingerprint,
		req.ExecutionID, req.Owner, millis(req.LockTTL), millis(req.ReplayTTL), string(req.LeaseExpiry), "1").StringSlice()
	if err != nil || reply[0] != "claimed" {
		w.t.Fatalf("old-layout claim: %v %v", reply, err)
	}
	if w.keys.usesPointer(req.Step) { // what the old point.lua did in the claim's pipeline
		if err := w.client.SAdd(w.t.Context(), w.keys.legacyPointer(req.Scope), keys[0]).Err(); err != nil {
			w.t.Fatal(err)
		}
	}
	d, err := decodeDecision(req, []string{"claimed", "t" + reply[1], reply[2], reply[3]})
	if err != nil {
		w.t.Fatal(err)
	}
	return d.Lease.FencingToken
}

// completed makes an old-layout COMPLETED record.
func (w *legacyWriter) completed(req idempotency.ClaimRequest, resp idempotency.StoredResponse) {
	w.t.Helper()
	fence := w.claimed(req)
	rec := w.keys.legacyRecord(req.Scope, w.keys.slotStep(req))
	ok, err := w.complete.Run(w.t.Context(), w.client, []string{rec}, req.Owner, fence, millis(time.Hour), resp.Status, resp.ContentType, resp.Body).Int()
	if err != nil || ok != 1 {
		w.t.Fatalf("old-layout complete: %d %v", ok, err)
	}
}

// TestPreviousLayoutStillDecides: records a gateway of the previous layout
// wrote keep deciding claims after the upgrade — a COMPLETED one replays
// byte for byte with its execution id (the tool does not run again), an
// IN_PROGRESS one answers in progress, an UNKNOWN one unknown, its step
// entry still guards the step, an expired claim is taken over with a
// larger fencing token — and the admin side (Get, List, Resolve, Delete)
// sees them. On a single Redis and on a cluster node, which refuses a
// script whose keys leave one slot.
func TestPreviousLayoutStillDecides(t *testing.T) {
	for name, client := range map[string]redis.UniversalClient{"single": testClient(t), "cluster": oneNodeCluster(t)} {
		t.Run(name, func(t *testing.T) { testPreviousLayout(t, client) })
	}
}

func testPreviousLayout(t *testing.T, client redis.UniversalClient) {
	ctx := t.Context()
	s := New(client, Options{Prefix: uniquePrefix(t, client)})
	old := newLegacyWriter(t, client, s)
	req := func(key, session string, index uint64) idempotency.ClaimRequest {
		return idempotency.ClaimRequest{
			Scope:       idempotency.Scope{Tenant: "acme", Tool: "charge", Key: key},
			Fingerprint: "f0e1d2c3b4a5968778695a4b3c2d1e0ff0e1d2c3b4a5968778695a4b3c2d1e0f",
			Step:        &idempotency.Step{SessionID: session, Index: index}, StepGuard: true, StepBoundKey: true,
			ExecutionID: "01KBJ0000000000000000000" + key[len(key)-2:], Owner: "old-owner-" + key,
			LockTTL: time.Minute, ReplayTTL: time.Hour, LeaseExpiry: idempotency.LeaseExpiryRerun,
		}
	}
	body := []byte("{\"ok\":true,\"bytes\":\"\x00\xff{}\"}\n")
	resp := idempotency.StoredResponse{Status: 201, ContentType: "application/json; charset=utf-8", Body: body}

	done := req("key-done-01", "sess-1", 1)
	old.completed(done, resp)
	running := req("key-run-002", "sess-1", 2)
	old.claimed(running)
	dead := req("key-dead-03", "sess-1", 3)
	dead.LockTTL = 50 * time.Millisecond
	deadFence := old.claimed(dead)
	lost := req("key-lost-04", "sess-1", 4)
	lost.LockTTL, lost.LeaseExpiry = 50*time.Millisecond, idempotency.LeaseExpiryUnknown
	old.claimed(lost)

	newClaim := func(r idempotency.ClaimRequest) idempotency.Decision {
		t.Helper()
		r.ExecutionID, r.Owner = "01KBJ1111111111111111111AA", "new-owner"
		r.LockTTL = time.Minute
		d, err := s.Claim(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := newClaim(done); d.Outcome != idempotency.OutcomeReplay || d.ExecutionID != done.ExecutionID ||
		d.Response.Status != 201 || d.Response.ContentType != resp.ContentType || !bytes.Equal(d.Response.Body, body) {
		t.Fatalf("old COMPLETED record: %+v, want its replay byte for byte", d)
	}
	other := done
	other.Fingerprint = "other"
	if d := newClaim(other); d.Outcome != idempotency.OutcomeKeyReused {
		t.Fatalf("old record, other arguments: %v", d.Outcome)
	}
	if d := newClaim(running); d.Outcome != idempotency.OutcomeInProgress || d.ExecutionID != running.ExecutionID || d.RetryAfter <= 0 {
		t.Fatalf("old IN_PROGRESS record: %+v", d)
	}
	// The old step entry of sess-1/2 still guards the step against another key.
	if d := newClaim(req("key-else-05", "sess-1", 2)); d.Outcome != idempotency.OutcomeStepConflict ||
		d.Conflict.Tool != "charge" || d.Conflict.ExecutionID != running.ExecutionID {
		t.Fatalf("step held by an old record: %+v", d)
	}

	time.Sleep(60 * time.Millisecond) // the two short leases lapse
	taken := newClaim(dead)
	if taken.Outcome != idempotency.OutcomeClaimed || !taken.TakenOver || taken.Lease.FencingToken <= deadFence {
		t.Fatalf("expired old claim: %+v (old fence %d), want a takeover with a larger token", taken, deadFence)
	}
	if n := client.Exists(ctx, s.keys.legacyRecord(dead.Scope, dead.Step)).Val(); n != 0 {
		t.Fatal("the old record of a taken-over claim is still there")
	}
	if err := s.Complete(ctx, taken.Lease, resp, time.Hour); err != nil {
		t.Fatal(err)
	}
	if d := newClaim(dead); d.Outcome != idempotency.OutcomeReplay || d.ExecutionID != taken.ExecutionID {
		t.Fatalf("after the takeover: %+v", d)
	}
	lostNew := lost
	lostNew.LeaseExpiry = idempotency.LeaseExpiryUnknown
	if d := newClaim(lostNew); d.Outcome != idempotency.OutcomeUnknown || d.ExecutionID != lost.ExecutionID {
		t.Fatalf("expired old claim under lease_expiry unknown: %+v", d)
	}

	// Admin: Get and List see old records; Resolve answers the UNKNOWN one.
	if rec, err := s.Get(ctx, done.Scope); err != nil || rec.State != idempotency.StateCompleted || !bytes.Equal(rec.Response.Body, body) {
		t.Fatalf("get old record: %+v %v", rec, err)
	}
	states := map[string]idempotency.State{}
	for _, rec := range listAll(t, s, idempotency.ListFilter{Tenant: "acme", Limit: 2}) {
		states[rec.Scope.Key] = rec.State
	}
	if states["key-done-01"] != idempotency.StateCompleted || states["key-run-002"] != idempotency.StateInProgress ||
		states["key-dead-03"] != idempotency.StateCompleted || states["key-lost-04"] != idempotency.StateUnknown || len(states) != 4 {
		t.Fatalf("listed %v", states)
	}
	answer := idempotency.StoredResponse{Status: 200, ContentType: "text/plain", Body: []byte("refunded by hand")}
	if _, err := s.Resolve(ctx, done.Scope, answer, time.Hour); !errors.Is(err, idempotency.ErrNotResolvable) {
		t.Fatalf("resolve an old COMPLETED record: %v", err)
	}
	if rec, err := s.Resolve(ctx, lost.Scope, answer, time.Hour); err != nil || rec.State != idempotency.StateCompleted || rec.ExecutionID != lost.ExecutionID {
		t.Fatalf("resolve an old UNKNOWN record: %+v %v", rec, err)
	}
	if d := newClaim(lostNew); d.Outcome != idempotency.OutcomeReplay || string(d.Response.Body) != "refunded by hand" || d.ExecutionID != lost.ExecutionID {
		t.Fatalf("replay of the resolved old record: %+v", d)
	}
	if rec, err := s.FindExecution(ctx, running.ExecutionID); err != nil || rec.Scope != running.Scope {
		t.Fatalf("find an old record by execution id: %+v %v", rec, err)
	}
	if err := s.Delete(ctx, running.Scope); err != nil {
		t.Fatal(err)
	}
	if d := newClaim(req("key-else-05", "sess-1", 2)); d.Outcome != idempotency.OutcomeClaimed {
		t.Fatalf("the step after deleting its old holder: %v", d.Outcome)
	}

	// With the compat path off the old records are not looked at any more.
	off := New(client, Options{Prefix: s.keys.prefix, NoLegacyLayout: true})
	if _, err := off.Get(ctx, done.Scope); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("NoLegacyLayout still reads the old layout: %v", err)
	}
}

// listAll pages through a listing.
func listAll(t *testing.T, s *Store, f idempotency.ListFilter) []idempotency.Record {
	t.Helper()
	var all []idempotency.Record
	for pages := 0; ; pages++ {
		page, err := s.List(t.Context(), f)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Records) > f.Limit {
			t.Fatalf("page of %d records, limit %d", len(page.Records), f.Limit)
		}
		all = append(all, page.Records...)
		if page.Cursor == "" {
			return all
		}
		if pages > 10000 {
			t.Fatal("listing does not end")
		}
		f.Cursor = page.Cursor
	}
}
