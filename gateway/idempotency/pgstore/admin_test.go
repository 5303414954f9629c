package pgstore

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/internal/pgtest"
)

// TestUpgradeFromVersion1: a schema of version 1 with a live record is
// upgraded in place (the admin indexes added, nothing lost), and the
// record is then found by the admin lookups.
func TestUpgradeFromVersion1(t *testing.T) {
	url := pgtest.URL(t)
	pool := testPool(t, url)
	schema := pgtest.Schema(t, url)
	if _, err := migrateTo(t.Context(), pool, schema, 1); err != nil {
		t.Fatalf("build a version 1 schema: %v", err)
	}
	q := qualifier(schema)
	var outcome string
	err := pool.QueryRow(t.Context(), q(`SELECT outcome FROM @.claim('acme', 'pay', 'key-1', 'fp', 'exec-old', 'owner',
		30000000, 60000000, 'unknown', true, 'sess', 3)`)).Scan(&outcome)
	if err != nil || outcome != "claimed" {
		t.Fatalf("claim on the version 1 schema: %q %v", outcome, err)
	}

	s, err := New(t.Context(), pool, Options{Schema: schema, SweepInterval: -1})
	if err != nil {
		t.Fatalf("open the version 1 schema: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	rec, err := s.FindExecution(t.Context(), "exec-old")
	if err != nil || rec.Scope != (idempotency.Scope{Tenant: "acme", Tool: "pay", Key: "key-1"}) || rec.Step == nil || rec.Step.Index != 3 {
		t.Fatalf("FindExecution after the upgrade = %+v, %v", rec, err)
	}
	page, err := s.List(t.Context(), idempotency.ListFilter{Tenant: "acme", SessionID: "sess", Limit: 10})
	if err != nil || len(page.Records) != 1 {
		t.Fatalf("List after the upgrade = %+v, %v; want the old record", page, err)
	}

	var version, indexes int
	if err := pool.QueryRow(t.Context(), q("SELECT max(version) FROM @.schema_version")).Scan(&version); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_indexes WHERE schemaname = $1 AND indexname = ANY($2)`,
		schema, []string{"records_created", "records_tenant_created", "records_tool_created", "records_open_state", "records_execution"}).Scan(&indexes); err != nil {
		t.Fatal(err)
	}
	if version != currentVersion || indexes != 5 {
		t.Fatalf("after the upgrade: version %d, %d admin indexes; want %d and 5", version, indexes, currentVersion)
	}
	// Running version 2 again (a migration interrupted after its
	// statements) changes nothing and fails nothing.
	if _, err := pool.Exec(t.Context(), q(migrations[1])); err != nil {
		t.Fatalf("version 2 run twice: %v", err)
	}
}

// TestAdminStatementsUseIndexes: every listing shape and the execution
// lookup have an index to use. Sequential scans are disabled for the
// session, so a plan without an index for the filter shows a Seq Scan.
func TestAdminStatementsUseIndexes(t *testing.T) {
	s, pool := newTestStore(t, Options{})
	if err := s.ready(t.Context()); err != nil {
		t.Fatal(err)
	}
	conn, err := pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(t.Context(), "SET enable_seqscan = off"); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = conn.Exec(t.Context(), "RESET enable_seqscan") }()

	cursor, err := listCursor{CreatedAt: pgNow(t, s), Tenant: "t", Tool: "x", Key: "k"}.encode()
	if err != nil {
		t.Fatal(err)
	}
	filters := map[string]idempotency.ListFilter{
		"all":            {},
		"unknown":        {State: idempotency.StateUnknown},
		"in progress":    {State: idempotency.StateInProgress},
		"pending":        {State: idempotency.StateAwaitingApproval},
		"expired":        {State: idempotency.StateExpired},
		"tenant":         {Tenant: "acme"},
		"tenant+tool":    {Tenant: "acme", Tool: "pay"},
		"tool":           {Tool: "pay"},
		"tenant+session": {Tenant: "acme", SessionID: "sess"},
		"tenant+cursor":  {Tenant: "acme", Cursor: cursor},
	}
	for name, f := range filters {
		f.Limit = 100
		sql, args, err := s.listStatement(f, false)
		if err != nil {
			t.Fatal(err)
		}
		plan := explain(t, conn.Conn(), sql, args...)
		if strings.Contains(plan, "Seq Scan") || !strings.Contains(plan, "Index") {
			t.Errorf("List %s: plan without an index:\n%s", name, plan)
		}
		if f.State == idempotency.StateUnknown && !strings.Contains(plan, "records_open_state") {
			t.Errorf("List %s does not use records_open_state:\n%s", name, plan)
		}
	}
	plan := explain(t, conn.Conn(), s.sql.findExecution, "exec-1")
	if !strings.Contains(plan, "records_execution") {
		t.Errorf("FindExecution does not use records_execution:\n%s", plan)
	}
}

// explain returns the plan of sql with args, one line per node.
func explain(t *testing.T, conn *pgx.Conn, sql string, args ...any) string {
	t.Helper()
	rows, err := conn.Query(t.Context(), "EXPLAIN "+sql, args...)
	if err != nil {
		t.Fatalf("explain: %v", err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// pgNow is the database's clock.
func pgNow(t *testing.T, s *Store) time.Time {
	t.Helper()
	var now time.Time
	if err := s.pool.QueryRow(t.Context(), "SELECT clock_timestamp()").Scan(&now); err != nil {
		t.Fatal(err)
	}
	return now
}
