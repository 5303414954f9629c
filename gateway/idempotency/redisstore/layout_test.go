package redisstore

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/storetest"
)

// TestScopeFoundWhateverTheSession: on a single Redis a record is found by
// its scope alone, so a key resent with other Agent-* headers (possible in
// opaque mode) replays or is refused as reused — it never runs again.
func TestScopeFoundWhateverTheSession(t *testing.T) {
	client := testClient(t)
	s := New(client, Options{Prefix: uniquePrefix(t, client)})
	ctx := t.Context()
	scope := idempotency.Scope{Tenant: "acme", Tool: "charge", Key: "order-1"}
	claim := func(session string, index uint64, fp string) idempotency.Decision {
		d, err := s.Claim(ctx, idempotency.ClaimRequest{
			Scope: scope, Fingerprint: fp, Step: &idempotency.Step{SessionID: session, Index: index}, StepGuard: true,
			ExecutionID: "exec-" + session, Owner: "owner-" + session, LockTTL: 10 * time.Second, ReplayTTL: time.Minute,
			LeaseExpiry: idempotency.LeaseExpiryRerun,
		})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	first := claim("s1", 1, "fp-a")
	if first.Outcome != idempotency.OutcomeClaimed {
		t.Fatalf("first claim: %v", first.Outcome)
	}
	if d := claim("s2", 7, "fp-a"); d.Outcome != idempotency.OutcomeInProgress {
		t.Fatalf("same key, other session, while running: %v", d.Outcome)
	}
	if err := s.Complete(ctx, first.Lease, idempotency.StoredResponse{Status: 200, ContentType: "application/json", Body: []byte(`{}`)}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if d := claim("s2", 7, "fp-a"); d.Outcome != idempotency.OutcomeReplay || d.ExecutionID != first.ExecutionID {
		t.Fatalf("same key, other session, after completion: %v %s", d.Outcome, d.ExecutionID)
	}
	if d := claim("s3", 2, "fp-b"); d.Outcome != idempotency.OutcomeKeyReused {
		t.Fatalf("same key, other session, other arguments: %v", d.Outcome)
	}
	// No pointer set is written on a single Redis: the record key is direct.
	if n, err := client.Exists(ctx, s.keys.pointer(scope)).Result(); err != nil || n != 0 {
		t.Fatalf("pointer set on a single Redis: %d %v", n, err)
	}
	rec, err := s.Get(ctx, scope)
	if err != nil || rec.State != idempotency.StateCompleted {
		t.Fatalf("get: %+v %v", rec, err)
	}
}

// TestCompletedCallFootprint pins the compact layout: a completed call with
// a 120-byte body is one plain string record and one embedded-string step
// entry, and the two keys take at most 464 bytes as Redis counts them
// (MEMORY USAGE with this test's 7-byte prefix: record 344, step entry
// 120; 448 under the default "gw:", whose shorter record name fits a
// smaller allocation). The layout before round four took 496, a hash
// record (the layout before that) 1 388.
func TestCompletedCallFootprint(t *testing.T) {
	client := testClient(t)
	// A short prefix like the default "gw:", unique to the test.
	s := New(client, Options{Prefix: "gw" + uniquePrefix(t, client)[len("gwtest:"):][:4] + ":"})
	t.Cleanup(func() { deletePrefix(t, client, s.keys.prefix) })
	ctx := t.Context()
	req := storetest.ReferenceCall(1)
	d, err := s.Claim(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, d.Lease, idempotency.StoredResponse{Status: 200, ContentType: "application/json", Body: storetest.ReferenceBody}, time.Hour); err != nil {
		t.Fatal(err)
	}
	record, step := s.keys.record(req.Scope, req.Step), s.keys.step(req.Scope.Tenant, *req.Step)
	// The record keeps only its session and step index; complete.lua
	// rebuilt the step entry's name from them and gave it the replay TTL
	// (the claim gave it lock + replay TTL).
	if ttl := client.PTTL(ctx, step).Val(); ttl <= 0 || ttl > time.Hour {
		t.Errorf("step entry TTL after Complete = %v, want the record's replay TTL (≤ 1h)", ttl)
	}
	total := int64(0)
	for key, encoding := range map[string]string{record: "raw", step: "embstr"} {
		if got := client.ObjectEncoding(ctx, key).Val(); got != encoding {
			t.Errorf("encoding of %q = %q, want %q", key[:len(s.keys.prefix)+2], got, encoding)
		}
		total += client.MemoryUsage(ctx, key).Val()
	}
	if total == 0 || total > 464 {
		t.Fatalf("a completed call takes %d bytes of Redis (MEMORY USAGE of record + step), want ≤ 464", total)
	}
	var keys []string
	iter := client.Scan(ctx, 0, s.keys.prefix+"*", 500).Iterator()
	for iter.Next(ctx) {
		if iter.Val() != s.keys.layoutKey() { // one per store, not per call
			keys = append(keys, iter.Val())
		}
	}
	if iter.Err() != nil || len(keys) != 2 {
		t.Fatalf("keys of one call: %d %v, want 2", len(keys), iter.Err())
	}
}

func layoutRequest(key string) idempotency.ClaimRequest {
	return idempotency.ClaimRequest{
		Scope:       idempotency.Scope{Tenant: "t", Tool: "tool", Key: key},
		Fingerprint: "fp", ExecutionID: "exec-" + key, Owner: "owner-" + key,
		LockTTL: time.Minute, ReplayTTL: time.Hour,
	}
}

// TestNewerLayoutDecidesNothing: a gateway that finds a newer layout
// version under its prefix claims nothing (a *LayoutError, the call path's
// 503) and its Ping names both versions (/readyz); a running store notices
// within idempotency.LayoutRefresh.
func TestNewerLayoutDecidesNothing(t *testing.T) {
	client := testClient(t)
	prefix := uniquePrefix(t, client)
	running := New(client, Options{Prefix: prefix})
	ctx := t.Context()
	if _, err := running.Claim(ctx, layoutRequest("before")); err != nil {
		t.Fatal(err)
	}
	if v, err := running.LayoutVersion(ctx); err != nil || v.Found != layoutVersion {
		t.Fatalf("layout version after the first claim = %+v, %v; want %d recorded", v, err, layoutVersion)
	}
	newer := newestKnownLayout + 1
	if err := client.Set(ctx, prefix+"layout", newer, 0).Err(); err != nil {
		t.Fatal(err)
	}
	keysBefore, err := client.Keys(ctx, prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(idempotency.LayoutRefresh + 100*time.Millisecond)
	started := New(client, Options{Prefix: prefix})
	for name, s := range map[string]*Store{"running": running, "started": started} {
		_, err := s.Claim(ctx, layoutRequest("after-"+name))
		var layoutErr *idempotency.LayoutError
		if !errors.As(err, &layoutErr) || layoutErr.Found != newer || layoutErr.Known != newestKnownLayout {
			t.Errorf("%s: Claim = %v, want a LayoutError %d > %d", name, err, newer, newestKnownLayout)
		}
		if _, err := s.Get(ctx, layoutRequest("before").Scope); !errors.Is(err, idempotency.ErrNewerLayout) {
			t.Errorf("%s: Get = %v, want ErrNewerLayout", name, err)
		}
		if err := s.Ping(ctx); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("layout version %d, this gateway knows up to %d", newer, newestKnownLayout)) {
			t.Errorf("%s: Ping = %v, want both versions named", name, err)
		}
	}
	keysAfter, err := client.Keys(ctx, prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keysAfter) != len(keysBefore) {
		t.Errorf("keys under the prefix: %d after the refused claims, want %d", len(keysAfter), len(keysBefore))
	}
	if v, _ := started.LayoutVersion(ctx); v.Found != newer {
		t.Errorf("an older gateway lowered the layout version to %d", v.Found)
	}
}
