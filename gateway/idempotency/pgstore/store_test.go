package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/storetest"
	"github.com/toolgateway/toolgateway/internal/pgtest"
)

func request(key string, step *idempotency.Step) idempotency.ClaimRequest {
	return idempotency.ClaimRequest{
		Scope:       idempotency.Scope{Tenant: "t", Tool: "tool", Key: key},
		Fingerprint: "fp", Step: step, StepGuard: step != nil, StepBoundKey: step != nil,
		ExecutionID: "exec-" + key, Owner: "owner-" + key,
		LockTTL: time.Minute, ReplayTTL: time.Hour, LeaseExpiry: idempotency.LeaseExpiryRerun,
	}
}

var okResponse = idempotency.StoredResponse{Status: 200, ContentType: "application/json", Body: []byte(`{"ok":true}`)}

// TestMigrateConcurrently starts many stores on one new schema at once, as
// replicas starting together do: the advisory lock lets exactly one create
// the schema, every store comes up and works, and the version is recorded
// once. Starting again later is a no-op.
func TestMigrateConcurrently(t *testing.T) {
	url := pgtest.URL(t)
	schema := pgtest.Schema(t, url)
	const replicas = 8
	stores := make([]*Store, replicas)
	errs := make([]error, replicas)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range replicas {
		pool := testPool(t, url) // a pool each, like separate processes
		wg.Go(func() {
			<-start
			stores[i], errs[i] = New(t.Context(), pool, Options{Schema: schema, SweepInterval: -1})
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("store %d: %v", i, err)
		}
		t.Cleanup(func() { _ = stores[i].Close() })
	}
	d, err := stores[0].Claim(t.Context(), request("k", nil))
	if err != nil || d.Outcome != idempotency.OutcomeClaimed {
		t.Fatalf("claim on store 0: %v %v", d.Outcome, err)
	}
	if d, err := stores[replicas-1].Claim(t.Context(), request("k", nil)); err != nil || d.Outcome != idempotency.OutcomeClaimed || d.ExecutionID != "exec-k" {
		t.Fatalf("the same claim on another store: %+v %v", d, err)
	}
	again, err := New(t.Context(), testPool(t, url), Options{Schema: schema, SweepInterval: -1})
	if err != nil {
		t.Fatalf("restart on a current schema: %v", err)
	}
	_ = again.Close()

	var rows, version int
	pool := testPool(t, url)
	if err := pool.QueryRow(t.Context(), qualifier(schema)("SELECT count(*), max(version) FROM @.schema_version")).Scan(&rows, &version); err != nil {
		t.Fatal(err)
	}
	if rows != currentVersion || version != currentVersion {
		t.Fatalf("schema_version has %d rows, version %d; want %d migrations applied once each", rows, version, currentVersion)
	}
}

// TestNewerSchemaDecidesNothing: a gateway older than its schema starts,
// but decides nothing on it (every operation a *LayoutError, the call
// path's 503) and its Ping names both versions (/readyz). A store that was
// already running notices within idempotency.LayoutRefresh.
func TestNewerSchemaDecidesNothing(t *testing.T) {
	running, pool := newTestStore(t, Options{})
	if _, err := running.Claim(t.Context(), request("before", nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(t.Context(), qualifier(running.schema)("INSERT INTO @.schema_version (version) VALUES ($1)"), currentVersion+1); err != nil {
		t.Fatal(err)
	}
	started, err := New(t.Context(), pool, Options{Schema: running.schema, SweepInterval: -1})
	if err != nil {
		t.Fatalf("New on a newer schema = %v, want a store that refuses to decide", err)
	}
	t.Cleanup(func() { _ = started.Close() })
	time.Sleep(idempotency.LayoutRefresh + 100*time.Millisecond)
	rows := count(t, running, pool)
	for name, s := range map[string]*Store{"started on it": started, "running before": running} {
		_, err := s.Claim(t.Context(), request("after-"+strings.ReplaceAll(name, " ", "-"), nil))
		var layoutErr *idempotency.LayoutError
		if !errors.As(err, &layoutErr) || layoutErr.Found != currentVersion+1 || layoutErr.Known != currentVersion {
			t.Errorf("%s: Claim = %v, want a LayoutError %d > %d", name, err, currentVersion+1, currentVersion)
		}
		if _, err := s.Get(t.Context(), request("before", nil).Scope); !errors.Is(err, idempotency.ErrNewerLayout) {
			t.Errorf("%s: Get = %v, want ErrNewerLayout", name, err)
		}
		err = s.Ping(t.Context())
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("version %d, this gateway knows up to %d", currentVersion+1, currentVersion)) {
			t.Errorf("%s: Ping = %v, want both versions named", name, err)
		}
	}
	if n := count(t, running, pool); n != rows {
		t.Errorf("records: %d after the refused claims, want %d", n, rows)
	}
}

func TestBadSchemaName(t *testing.T) {
	for _, name := range []string{"Upper", "semi;colon", "quo\"te", "1digit", strings.Repeat("a", 64)} {
		if _, err := New(t.Context(), nil, Options{Schema: name}); err == nil {
			t.Errorf("schema %q accepted", name)
		}
	}
}

// TestSweep fills the table with expired rows of every state and live rows,
// then lets several sweepers with a small batch run at once: every expired
// row goes exactly once, no live row is touched, and no statement deleted
// more than a batch.
func TestSweep(t *testing.T) {
	const batch, expired, live = 25, 400, 30
	s, pool := newTestStore(t, Options{SweepBatch: batch})
	ctx := t.Context()
	q := qualifier(s.schema)
	// Expired rows are written directly: waiting out hundreds of TTLs
	// through the API would only slow the test down.
	if _, err := pool.Exec(ctx, q(`INSERT INTO @.records (tenant, tool, idempotency_key, state, fingerprint, execution_id,
		fencing_token, created_at, expires_at, replay_us, session_id, step_index)
		SELECT 't', 'tool', 'old-' || i, (ARRAY['IN_PROGRESS','COMPLETED','UNKNOWN'])[1 + i % 3], 'fp', 'exec-' || i,
			nextval('@.fencing_tokens'), now() - interval '1 hour', now() - interval '1 second', 0, 'sess', i
		FROM generate_series(1, $1) i`), expired); err != nil {
		t.Fatal(err)
	}
	for i := range live {
		d, err := s.Claim(ctx, request(fmt.Sprintf("live-%d", i), &idempotency.Step{SessionID: "sess", Index: uint64(expired + 1 + i)}))
		if err != nil || d.Outcome != idempotency.OutcomeClaimed {
			t.Fatalf("claim: %v %v", d.Outcome, err)
		}
	}

	// One batch is bounded.
	n, err := s.sweepBatchOnce(ctx)
	if err != nil || n != batch {
		t.Fatalf("one sweep statement deleted %d rows (%v), want a batch of %d", n, err, batch)
	}
	const sweepers = 4
	var deleted atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range sweepers {
		wg.Go(func() {
			<-start
			n, err := s.Sweep(ctx)
			if err != nil {
				t.Errorf("concurrent sweep: %v", err)
			}
			deleted.Add(n)
		})
	}
	close(start)
	wg.Wait()
	if got := deleted.Load() + batch; got != expired {
		t.Fatalf("sweepers deleted %d rows in all, want %d", got, expired)
	}
	if n := count(t, s, pool); n != live {
		t.Fatalf("%d rows left, want the %d live ones", n, live)
	}
	if n, err := s.Sweep(ctx); n != 0 || err != nil {
		t.Fatalf("sweep of a clean table: %d, %v", n, err)
	}
}

// TestExpiredRowCountsAsAbsent: a row past expires_at that the sweep has
// not removed yet is invisible to Get and Delete and is replaced by a
// first claim (not a takeover, not a replay); its step is free.
func TestExpiredRowCountsAsAbsent(t *testing.T) {
	s, pool := newTestStore(t, Options{})
	ctx := t.Context()
	step := &idempotency.Step{SessionID: "s", Index: 1}
	d, err := s.Claim(ctx, request("k", step))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, d.Lease, okResponse, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, qualifier(s.schema)("UPDATE @.records SET expires_at = now() - interval '1 second'")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, d.Lease.Scope); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("Get of an expired row = %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, d.Lease.Scope); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("Delete of an expired row = %v, want ErrNotFound", err)
	}
	other := request("other", step)
	if d, err := s.Claim(ctx, other); err != nil || d.Outcome != idempotency.OutcomeClaimed {
		t.Fatalf("claim of the expired row's step: %v %v", d.Outcome, err)
	}
	again := request("k", nil)
	again.Owner, again.ExecutionID = "owner-2", "exec-2"
	if d, err := s.Claim(ctx, again); err != nil || d.Outcome != idempotency.OutcomeClaimed || d.TakenOver {
		t.Fatalf("claim over the expired row: %+v %v", d, err)
	}
}

// statementCounter counts the statements a pool sends, except the layout
// guard's read of the schema version (at most one per
// idempotency.LayoutRefresh per gateway, not per decision).
type statementCounter struct{ n, versionReads atomic.Int64 }

func (c *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if strings.Contains(data.SQL, "schema_version") {
		c.versionReads.Add(1)
	} else {
		c.n.Add(1)
	}
	return ctx
}

func (c *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestOneStatementPerDecision: claim, replay, renew, complete and release
// each send exactly one statement (one round trip on a warm connection,
// whose prepared statements pgx caches).
func TestOneStatementPerDecision(t *testing.T) {
	url := pgtest.URL(t)
	schema := pgtest.Schema(t, url)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	counter := &statementCounter{}
	cfg.ConnConfig.Tracer = counter
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := New(t.Context(), pool, Options{Schema: schema, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	cost := func(op func() error) int64 {
		t.Helper()
		before := counter.n.Load()
		if err := op(); err != nil {
			t.Fatal(err)
		}
		return counter.n.Load() - before
	}
	for i, step := range []*idempotency.Step{nil, {SessionID: "session", Index: 1}} {
		var d idempotency.Decision
		req := request(fmt.Sprintf("key-%d", i), step)
		costs := map[string]int64{
			"claim":    cost(func() (err error) { d, err = s.Claim(ctx, req); return err }),
			"renew":    cost(func() error { return s.Renew(ctx, d.Lease, time.Minute) }),
			"complete": cost(func() error { return s.Complete(ctx, d.Lease, okResponse, time.Hour) }),
			"replay":   cost(func() (err error) { d, err = s.Claim(ctx, req); return err }),
		}
		if d.Outcome != idempotency.OutcomeReplay {
			t.Fatalf("outcome %v, want replay", d.Outcome)
		}
		released := request(fmt.Sprintf("released-%d", i), nil)
		costs["claim again"] = cost(func() (err error) { d, err = s.Claim(ctx, released); return err })
		costs["release"] = cost(func() error { return s.Release(ctx, d.Lease) })
		for op, n := range costs {
			if n != 1 {
				t.Errorf("step %v: %s sent %d statements, want 1", step != nil, op, n)
			}
		}
	}
}

// TestErrorsCarryNoFullKey: a failing store names the key by its prefix
// only, whatever operation failed.
func TestErrorsCarryNoFullKey(t *testing.T) {
	s, _ := newTestStore(t, Options{})
	key := "secret-key-0123456789abcdef"
	req := request(key, nil)
	d, err := s.Claim(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	_, claimErr := s.Claim(cancelled, req)
	_, getErr := s.Get(cancelled, req.Scope)
	for name, err := range map[string]error{
		"claim": claimErr, "get": getErr,
		"renew":    s.Renew(cancelled, d.Lease, time.Minute),
		"complete": s.Complete(cancelled, d.Lease, okResponse, time.Hour),
		"release":  s.Release(cancelled, d.Lease),
		"delete":   s.Delete(cancelled, req.Scope),
	} {
		if err == nil {
			t.Errorf("%s on a cancelled context succeeded", name)
			continue
		}
		if strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), req.Scope.String()) {
			t.Errorf("%s error %q: want the key's prefix only", name, err)
		}
	}
}

func TestIsConnectionError(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&pgconn.ConnectError{}, true},
		{fmt.Errorf("migrate: %w", &pgconn.PgError{Code: "57P03"}), true}, // starting up
		{&pgconn.PgError{Code: "53300"}, true},                            // too many connections
		{&pgconn.PgError{Code: "42501"}, false},                           // insufficient privilege
		{fmt.Errorf("x: %w", &idempotency.LayoutError{Store: storeKind, Found: 9, Known: 5}), false},
		{context.DeadlineExceeded, true},
	} {
		if got := IsConnectionError(tc.err); got != tc.want {
			t.Errorf("IsConnectionError(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestClaimChecksTheRequestLikeEveryStore: a claim the request's own rule
// refuses (ClaimRequest.Validate) is refused before the database, and the
// error names the scope the way every store does (Scope.String: tenant,
// tool and idempotency.KeyPrefix of the key, short keys included).
func TestClaimChecksTheRequestLikeEveryStore(t *testing.T) {
	s, _ := newTestStore(t, Options{})
	for _, mutate := range []func(*idempotency.ClaimRequest){
		func(r *idempotency.ClaimRequest) { r.LockTTL = 0 },
		func(r *idempotency.ClaimRequest) { r.Owner = "" },
		func(r *idempotency.ClaimRequest) { r.LeaseExpiry = "sometimes" },
	} {
		req := request("k1", nil)
		mutate(&req)
		want := req.Validate()
		_, err := s.Claim(t.Context(), req)
		if want == nil || err == nil || !strings.Contains(err.Error(), want.Error()) || !strings.Contains(err.Error(), "t/tool/k1…") {
			t.Errorf("claim %+v: error %v, want %v naming t/tool/k1…", req, err, want)
		}
	}
	if n := count(t, s, s.pool); n != 0 {
		t.Fatalf("refused claims left %d rows", n)
	}
}

// TestClaimPlansPerCall: the claim function plans each call for its own
// arguments (schema version 4), on a new schema and on one upgraded from
// version 3: a generic plan cached while the table was small made claims
// slow down as the table grew.
func TestClaimPlansPerCall(t *testing.T) {
	url := pgtest.URL(t)
	pool := testPool(t, url)
	config := func(schema string) []string {
		t.Helper()
		var settings []string
		err := pool.QueryRow(t.Context(), `SELECT coalesce(p.proconfig, '{}') FROM pg_proc p
			JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1 AND p.proname = 'claim'`, schema).Scan(&settings)
		if err != nil {
			t.Fatal(err)
		}
		return settings
	}
	fresh := pgtest.Schema(t, url)
	if _, err := migrate(t.Context(), pool, fresh); err != nil {
		t.Fatal(err)
	}
	upgraded := pgtest.Schema(t, url)
	if _, err := migrateTo(t.Context(), pool, upgraded, 3); err != nil {
		t.Fatal(err)
	}
	if got := config(upgraded); len(got) != 0 {
		t.Fatalf("version 3's claim already has settings %v", got)
	}
	if _, err := migrate(t.Context(), pool, upgraded); err != nil {
		t.Fatal(err)
	}
	for _, schema := range []string{fresh, upgraded} {
		if got := config(schema); !slices.Contains(got, "plan_cache_mode=force_custom_plan") {
			t.Errorf("schema %s: claim settings %v, want plan_cache_mode=force_custom_plan", schema, got)
		}
	}
}

// TestConformance runs the whole suite, each subtest on a store in a fresh
// schema of its own.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) idempotency.Store {
		s, _ := newTestStore(t, Options{})
		return s
	})
}

func TestReceiptOutbox(t *testing.T) {
	storetest.RunOutbox(t, func(t *testing.T, outbox bool) idempotency.Store {
		s, _ := newTestStore(t, Options{ReceiptOutbox: outbox})
		return s
	})
}
