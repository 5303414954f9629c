package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/ratelimit"
	"github.com/toolgateway/toolgateway/internal/pgtest"
)

// TestVersion1SchemaUpgradesInPlace: a schema left at version 1 by an
// older gateway (records, no limit tables) is upgraded at start: its
// records stay and replay, the limit tables appear, and the version is
// recorded.
func TestVersion1SchemaUpgradesInPlace(t *testing.T) {
	url := pgtest.URL(t)
	schema := pgtest.Schema(t, url)
	pool := testPool(t, url)
	q := qualifier(schema)
	// What migrate wrote for version 1.
	for _, sql := range []string{
		`CREATE TABLE @.schema_version (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT clock_timestamp())`,
		migrations[0],
		`INSERT INTO @.schema_version (version) VALUES (1)`,
	} {
		if _, err := pool.Exec(t.Context(), q(sql)); err != nil {
			t.Fatal(err)
		}
	}
	var hasLimits bool
	if err := pool.QueryRow(t.Context(), "SELECT to_regclass($1) IS NOT NULL", schema+".rate_limits").Scan(&hasLimits); err != nil || hasLimits {
		t.Fatalf("version 1 has rate_limits (%v, %v)", hasLimits, err)
	}
	// A completed record of the old gateway, written by its claim function.
	req := request("old", nil)
	var outcome string
	// Version 1's claim function takes 12 arguments (version 5 adds the
	// canonical arguments).
	claimV1 := q(`SELECT outcome FROM @.claim($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`)
	if err := pool.QueryRow(t.Context(), claimV1, req.Scope.Tenant, req.Scope.Tool, req.Scope.Key, req.Fingerprint,
		req.ExecutionID, req.Owner, micros(req.LockTTL), micros(req.ReplayTTL), string(req.LeaseExpiry), false, nil, nil,
	).Scan(&outcome); err != nil || outcome != "claimed" {
		t.Fatalf("claim on version 1: %q %v", outcome, err)
	}
	if _, err := pool.Exec(t.Context(), q(`UPDATE @.records SET state = 'COMPLETED', owner = NULL, lease_expires_at = NULL, status = 200, content_type = 'application/json', body = '{"ok":true}'`)); err != nil {
		t.Fatal(err)
	}

	s, err := New(t.Context(), pool, Options{Schema: schema, SweepInterval: -1})
	if err != nil {
		t.Fatalf("start on a version 1 schema: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	var version int
	if err := pool.QueryRow(t.Context(), q("SELECT max(version) FROM @.schema_version")).Scan(&version); err != nil || version != currentVersion {
		t.Fatalf("version %d (%v), want %d", version, err, currentVersion)
	}
	d, err := s.Claim(t.Context(), req)
	if err != nil || d.Outcome != idempotency.OutcomeReplay || string(d.Response.Body) != `{"ok":true}` {
		t.Fatalf("the old record after the upgrade: %+v %v", d, err)
	}
	lim := s.Limiter()
	l := ratelimit.Limit{Rate: 1, Period: time.Hour, Burst: 1}
	if v, err := lim.Allow(t.Context(), "acme", l); err != nil || !v.Allowed {
		t.Fatalf("first call after the upgrade: %+v %v", v, err)
	}
	if v, err := lim.Allow(t.Context(), "acme", l); err != nil || v.Allowed {
		t.Fatalf("second call of a 1/h burst 1: %+v %v", v, err)
	}
	if ok, err := lim.Acquire(t.Context(), "acme", "h", 1, time.Minute); err != nil || !ok {
		t.Fatalf("acquire after the upgrade: %v %v", ok, err)
	}
}

// TestLimitTablesAreUnlogged: the limit state writes no WAL, so a check's
// commit waits for no flush (limits.go says why that is acceptable).
func TestLimitTablesAreUnlogged(t *testing.T) {
	s, pool := newTestStore(t, Options{})
	for _, table := range []string{"rate_limits", "inflight_slots"} {
		var persistence string
		if err := pool.QueryRow(t.Context(), "SELECT relpersistence::text FROM pg_class WHERE oid = to_regclass($1)", s.schema+"."+table).Scan(&persistence); err != nil {
			t.Fatal(err)
		}
		if persistence != "u" {
			t.Errorf("%s: relpersistence %q, want u (unlogged)", table, persistence)
		}
	}
}

// TestRetryAfterIsTheGCRAWait: a refusal's RetryAfter is the wait until
// the next call passes, as in ratelimit.Memory: at most one emission
// interval after a burst, and the call passes once it has elapsed.
func TestRetryAfterIsTheGCRAWait(t *testing.T) {
	s, _ := newTestStore(t, Options{})
	lim := s.Limiter()
	l := ratelimit.Limit{Rate: 5, Period: time.Second, Burst: 2} // one per 200 ms
	for i := range 2 {
		if v, err := lim.Allow(t.Context(), "acme", l); err != nil || !v.Allowed {
			t.Fatalf("call %d of the burst: %+v %v", i, v, err)
		}
	}
	v, err := lim.Allow(t.Context(), "acme", l)
	if err != nil || v.Allowed || v.RetryAfter <= 0 || v.RetryAfter > 200*time.Millisecond {
		t.Fatalf("over the burst: %+v %v; want a refusal within one emission interval", v, err)
	}
	time.Sleep(v.RetryAfter)
	if v, err := lim.Allow(t.Context(), "acme", l); err != nil || !v.Allowed {
		t.Fatalf("after RetryAfter: %+v %v", v, err)
	}
	if _, err := lim.Allow(t.Context(), "acme", ratelimit.Limit{Rate: 1, Period: time.Second}); err == nil {
		t.Fatal("a limit without a burst was accepted")
	}
}

// TestRetryAfterOfAQueuedCall: a call that read the clock and then queued
// on the tenant's row behind a decision taken later is decided at that
// later time, so its wait is still at most one emission interval (it
// once came out as the interval plus the time it queued: a Retry-After of
// 61 s for a rate of 60 an hour).
func TestRetryAfterOfAQueuedCall(t *testing.T) {
	s, pool := newTestStore(t, Options{})
	lim := s.Limiter()
	l := ratelimit.Limit{Rate: 60, Period: time.Hour, Burst: 1} // one per minute
	emission, _ := l.GCRA()
	// The tenant's row, decided long ago: its next call passes.
	if _, err := pool.Exec(t.Context(), "INSERT INTO "+s.schema+".rate_limits (tenant, tat_ns, decided_ns, retry_ns) VALUES ('acme', 0, 0, 0)"); err != nil {
		t.Fatal(err)
	}
	holder, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(context.Background()) }()
	var holderPID int
	if err := holder.QueryRow(t.Context(), "SELECT pg_backend_pid() FROM "+s.schema+".rate_limits WHERE tenant = 'acme' FOR UPDATE").Scan(&holderPID); err != nil {
		t.Fatal(err)
	}
	queued := make(chan ratelimit.Verdict, 1)
	go func() {
		v, err := lim.Allow(context.Background(), "acme", l)
		if err != nil {
			t.Error(err)
		}
		queued <- v
	}()
	// Wait until the queued call waits for the row's lock: it has read
	// its clock by then.
	deadline := time.Now().Add(30 * time.Second)
	for waiting := false; !waiting; time.Sleep(5 * time.Millisecond) {
		if err := pool.QueryRow(t.Context(), "SELECT count(*) > 0 FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))", holderPID).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the second call never queued on the tenant's row")
		}
	}
	time.Sleep(20 * time.Millisecond) // the decision below is taken this much later
	var retry int64
	if err := holder.QueryRow(t.Context(), lim.sql.allow, "acme", int64(emission), int64(emission)).Scan(&retry); err != nil || retry != 0 {
		t.Fatalf("the decision holding the row: retry %d, %v; want allowed", retry, err)
	}
	if err := holder.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	v := <-queued
	if v.Allowed || v.RetryAfter <= 0 || v.RetryAfter > emission {
		t.Fatalf("the queued call: %+v; want a refusal within one emission interval (%v)", v, emission)
	}
}
