package redisstore

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/internal/redistest"
)

// TestAdmin runs the admin cases on a single Redis and on a real
// three-master cluster, where a listing walks every master.
func TestAdmin(t *testing.T) {
	single := testClient(t)
	t.Run("single", func(t *testing.T) { testAdmin(t, New(single, Options{Prefix: uniquePrefix(t, single)})) })
	cluster := redistest.StartCluster(t, 3)
	client := cluster.Client()
	t.Cleanup(func() { _ = client.Close() })
	t.Run("cluster", func(t *testing.T) { testAdmin(t, New(client, Options{Prefix: redistest.Prefix("admin")})) })
}

func testAdmin(t *testing.T, s *Store) {
	ctx := t.Context()
	index := map[string]uint64{} // one step per key
	claim := func(tenant, tool, key, session string, lock time.Duration, expiry idempotency.LeaseExpiry) idempotency.Decision {
		t.Helper()
		if _, ok := index[key]; !ok {
			index[key] = uint64(len(index))
		}
		d, err := s.Claim(ctx, idempotency.ClaimRequest{
			Scope: idempotency.Scope{Tenant: tenant, Tool: tool, Key: key}, Fingerprint: "fp-" + key,
			Step: &idempotency.Step{SessionID: session, Index: index[key]}, StepGuard: true, StepBoundKey: true,
			ExecutionID: "exec-" + tenant + "-" + key, Owner: "owner-" + key + time.Now().String(),
			LockTTL: lock, ReplayTTL: time.Hour, LeaseExpiry: expiry,
		})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	resp := func(key string) idempotency.StoredResponse {
		return idempotency.StoredResponse{Status: 200, ContentType: "application/json", Body: []byte(`{"key":"` + key + `"}`)}
	}
	// 30 completed calls over 2 tenants × 3 tools, one session per tenant+tool,
	// 2 running ones, 1 that expires at once.
	want := map[string]idempotency.State{}
	for i := range 30 {
		tenant, tool := fmt.Sprintf("t%d", i%2), fmt.Sprintf("tool%d", i%3)
		key := fmt.Sprintf("k%02d", i)
		d := claim(tenant, tool, key, tenant+tool, time.Minute, idempotency.LeaseExpiryRerun)
		if err := s.Complete(ctx, d.Lease, resp(key), time.Hour); err != nil {
			t.Fatal(err)
		}
		want[tenant+"/"+key] = idempotency.StateCompleted
	}
	for _, key := range []string{"run1", "run2"} {
		claim("t0", "tool0", key, "t0tool0", time.Minute, idempotency.LeaseExpiryRerun)
		want["t0/"+key] = idempotency.StateInProgress
	}
	gone := claim("t0", "tool0", "gone", "t0tool0", time.Minute, idempotency.LeaseExpiryRerun)
	if err := s.Complete(ctx, gone.Lease, resp("gone"), time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // past its expiry

	for _, bad := range []idempotency.ListFilter{{Limit: 0}, {Limit: idempotency.MaxListLimit + 1}, {Limit: 10, SessionID: "s"}, {Limit: 10, Cursor: "nonsense"}} {
		if _, err := s.List(ctx, bad); err == nil {
			t.Errorf("List(%+v) accepted", bad)
		}
	}
	got := map[string]idempotency.State{}
	for _, rec := range listAll(t, s, idempotency.ListFilter{Limit: 4}) {
		id := rec.Scope.Tenant + "/" + rec.Scope.Key
		got[id] = rec.State // SCAN may return a record twice while the keyspace is resized
		if rec.Response != nil {
			t.Errorf("%s listed with its response", id)
		}
		if rec.Step == nil || rec.Step.SessionID != rec.Scope.Tenant+rec.Scope.Tool || rec.Step.Index != index[rec.Scope.Key] {
			t.Errorf("%s listed with step %+v", id, rec.Step)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("listed %v\nwant %v (the expired record is not listed)", got, want)
	}

	count := func(f idempotency.ListFilter) []string {
		unique := map[string]bool{} // SCAN may return a record twice
		for _, rec := range listAll(t, s, f) {
			unique[rec.Scope.Tenant+"/"+rec.Scope.Tool+"/"+rec.Scope.Key+"/"+string(rec.State)] = true
		}
		keys := slices.Sorted(maps.Keys(unique))
		return keys
	}
	if n := len(count(idempotency.ListFilter{State: idempotency.StateInProgress, Limit: 1})); n != 2 {
		t.Errorf("IN_PROGRESS records listed: %d, want 2", n)
	}
	if n := len(count(idempotency.ListFilter{Tenant: "t1", Limit: 7})); n != 15 {
		t.Errorf("records of t1 listed: %d, want 15", n)
	}
	if keys := count(idempotency.ListFilter{Tenant: "t1", Tool: "tool2", Limit: 1000}); len(keys) != 5 {
		t.Errorf("records of t1/tool2: %v, want 5", keys)
	}
	// Session t0tool0 holds k00 k06 k12 k18 k24 and the two running calls.
	if keys := count(idempotency.ListFilter{Tenant: "t0", SessionID: "t0tool0", Limit: 3}); len(keys) != 7 {
		t.Errorf("records of session t0tool0: %v, want 7", keys)
	}
	if keys := count(idempotency.ListFilter{Tenant: "t1", SessionID: "t0tool0", Limit: 3}); len(keys) != 0 {
		t.Errorf("another tenant's session listed: %v", keys)
	}

	// FindExecution, in any tenant, with the response when COMPLETED.
	rec, err := s.FindExecution(ctx, "exec-t1-k07")
	if err != nil || rec.Scope != (idempotency.Scope{Tenant: "t1", Tool: "tool1", Key: "k07"}) || rec.Response == nil || string(rec.Response.Body) != `{"key":"k07"}` {
		t.Fatalf("FindExecution: %+v %v", rec, err)
	}
	if rec, err := s.FindExecution(ctx, "exec-t0-run1"); err != nil || rec.State != idempotency.StateInProgress || rec.Response != nil {
		t.Fatalf("FindExecution of a running call: %+v %v", rec, err)
	}
	if _, err := s.FindExecution(ctx, "exec-nobody"); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("FindExecution of no record: %v", err)
	}

	// Resolve.
	answer := idempotency.StoredResponse{Status: 202, ContentType: "text/plain", Body: []byte("done by hand")}
	scope := func(tenant, key string) idempotency.Scope {
		return idempotency.Scope{Tenant: tenant, Tool: "tool0", Key: key}
	}
	if _, err := s.Resolve(ctx, scope("t0", "k00"), answer, time.Hour); !errors.Is(err, idempotency.ErrNotResolvable) {
		t.Errorf("resolve COMPLETED: %v", err)
	}
	if _, err := s.Resolve(ctx, scope("t0", "run1"), answer, time.Hour); !errors.Is(err, idempotency.ErrNotResolvable) {
		t.Errorf("resolve IN_PROGRESS with a live lease: %v", err)
	}
	if _, err := s.Resolve(ctx, scope("t0", "nothing"), answer, time.Hour); !errors.Is(err, idempotency.ErrNotFound) {
		t.Errorf("resolve no record: %v", err)
	}
	stuck := claim("t0", "tool0", "stuck", "s-stuck", 30*time.Millisecond, idempotency.LeaseExpiryUnknown)
	dead := claim("t0", "tool0", "dead", "s-dead", 30*time.Millisecond, idempotency.LeaseExpiryRerun)
	time.Sleep(40 * time.Millisecond)
	if d := claim("t0", "tool0", "stuck", "s-stuck", time.Minute, idempotency.LeaseExpiryUnknown); d.Outcome != idempotency.OutcomeUnknown {
		t.Fatalf("stuck call: %v, want unknown", d.Outcome)
	}
	for _, c := range []struct {
		key     string
		d       idempotency.Decision
		session string
	}{{"stuck", stuck, "s-stuck"}, {"dead", dead, "s-dead"}} {
		rec, err := s.Resolve(ctx, scope("t0", c.key), answer, time.Hour)
		if err != nil || rec.State != idempotency.StateCompleted || rec.ExecutionID != c.d.ExecutionID ||
			rec.Fingerprint != "fp-"+c.key || rec.Step == nil || rec.Step.SessionID != c.session || string(rec.Response.Body) != "done by hand" {
			t.Fatalf("resolve %s: %+v %v", c.key, rec, err)
		}
		d := claim("t0", "tool0", c.key, c.session, time.Minute, idempotency.LeaseExpiryRerun)
		if d.Outcome != idempotency.OutcomeReplay || d.ExecutionID != c.d.ExecutionID || d.Response.Status != 202 || string(d.Response.Body) != "done by hand" {
			t.Fatalf("claim after resolving %s: %+v", c.key, d)
		}
	}
	// The resolved record keeps its step: another key on that step conflicts.
	index["other"] = index["stuck"]
	if d := claim("t0", "tool0", "other", "s-stuck", time.Minute, idempotency.LeaseExpiryRerun); d.Outcome != idempotency.OutcomeStepConflict || d.Conflict.ExecutionID != stuck.ExecutionID {
		t.Fatalf("step of a resolved record: %+v", d)
	}
}

// TestListWorkIsBounded: a page scans a bounded number of keys, so a
// listing of a sparse filter over many records returns short (even empty)
// pages with a cursor rather than one long scan.
func TestListWorkIsBounded(t *testing.T) {
	server := redistest.Start(t)
	client := redis.NewClient(&redis.Options{Addr: server.Addr})
	t.Cleanup(func() { _ = client.Close() })
	s := New(client, Options{})
	ctx := t.Context()
	const n = 5000
	for i := range n {
		d, err := s.Claim(ctx, idempotency.ClaimRequest{Scope: idempotency.Scope{Tenant: "t", Tool: "tool", Key: fmt.Sprint(i)},
			Fingerprint: "fp", ExecutionID: "e", Owner: "o", LockTTL: time.Minute, ReplayTTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if err := s.Complete(ctx, d.Lease, idempotency.StoredResponse{Status: 200}, time.Hour); err != nil {
				t.Fatal(err)
			}
		}
	}
	counter := &roundTrips{}
	client.AddHook(counter)
	page, err := s.List(ctx, idempotency.ListFilter{Tenant: "nobody", Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Records) != 0 || page.Cursor == "" {
		t.Fatalf("first page of an empty filter over %d records: %d records, cursor %q; want none and a cursor", n, len(page.Records), page.Cursor)
	}
	if rt := counter.n.Load(); rt > 2*listRounds {
		t.Fatalf("one page cost %d round trips, want at most %d", rt, 2*listRounds)
	}
	if got := len(listAll(t, s, idempotency.ListFilter{State: idempotency.StateCompleted, Limit: 1000})); got != n/2 {
		t.Fatalf("listed %d COMPLETED records, want %d", got, n/2)
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
