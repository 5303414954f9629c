package pgstore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/storetest"
	"github.com/toolgateway/toolgateway/internal/pgtest"
)

// sizeWorkers send the calls in parallel, so the run takes well under two
// minutes on a shared machine.
const sizeWorkers = 16

// relationSizes are the on-disk sizes of the records table, in bytes.
type relationSizes struct {
	total   int64            // pg_total_relation_size: heap + indexes + TOAST (all forks)
	heap    int64            // pg_relation_size: the main fork of the heap
	indexes int64            // pg_indexes_size
	index   map[string]int64 // pg_relation_size of each index
	rows    int64
	live    int64 // sum of pg_column_size(row): the live tuples' own bytes
}

func readSizes(ctx context.Context, tb testing.TB, pool *pgxpool.Pool, schema string) relationSizes {
	tb.Helper()
	q := qualifier(schema)
	table := pgxIdent(schema) + ".records"
	var s relationSizes
	err := pool.QueryRow(ctx, `SELECT pg_total_relation_size($1::regclass), pg_relation_size($1::regclass),
		pg_indexes_size($1::regclass)`, table).Scan(&s.total, &s.heap, &s.indexes)
	if err != nil {
		tb.Fatalf("relation sizes: %v", err)
	}
	if err := pool.QueryRow(ctx, q(`SELECT count(*), coalesce(sum(pg_column_size(r.*)), 0) FROM @.records r`)).Scan(&s.rows, &s.live); err != nil {
		tb.Fatalf("row sizes: %v", err)
	}
	rows, err := pool.Query(ctx, `SELECT c.relname, pg_relation_size(c.oid) FROM pg_index i
		JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = $1::regclass ORDER BY c.relname`, table)
	if err != nil {
		tb.Fatalf("index sizes: %v", err)
	}
	defer rows.Close()
	s.index = map[string]int64{}
	for rows.Next() {
		var name string
		var size int64
		if err := rows.Scan(&name, &size); err != nil {
			tb.Fatalf("index sizes: %v", err)
		}
		s.index[name] = size
	}
	if err := rows.Err(); err != nil {
		tb.Fatalf("index sizes: %v", err)
	}
	return s
}

// pgxIdent quotes a schema name for SQL text and regclass literals.
func pgxIdent(schema string) string { return pgx.Identifier{schema}.Sanitize() }

// BenchmarkBytesPerCall completes storetest.ReferenceCalls calls (claim + complete,
// 120-byte bodies) through the store API in a schema of its own and
// reports the growth of the records table per call after VACUUM ANALYZE:
// pg_total_relation_size (heap + indexes + TOAST), the heap's main fork,
// each index, and the live rows' own bytes; then the same after VACUUM
// FULL (the table rewritten packed, without the free space the
// completions' row versions left). Run with -benchtime=1x: one iteration
// is the whole measurement.
//
// The sessions run with synchronous_commit off: it changes when a commit
// waits for the WAL flush, not what is stored, and lets 200 000 commits
// finish in well under two minutes on a shared machine.
func BenchmarkBytesPerCall(b *testing.B) {
	for b.Loop() {
		measureBytesPerCall(b)
	}
}

func measureBytesPerCall(b *testing.B) {
	ctx := b.Context()
	url := pgtest.URL(b)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = sizeWorkers + 2
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	schema := pgtest.Schema(b, url)
	store, err := New(ctx, pool, Options{Schema: schema, SweepInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	vacuum := func(full bool) {
		sql := "VACUUM ANALYZE " + pgxIdent(schema) + ".records"
		if full {
			sql = "VACUUM FULL ANALYZE " + pgxIdent(schema) + ".records"
		}
		if _, err := pool.Exec(ctx, sql); err != nil {
			b.Fatalf("%s: %v", sql, err)
		}
	}
	resp := idempotency.StoredResponse{Status: 200, ContentType: "application/json", Body: storetest.ReferenceBody}
	vacuum(false)
	before := readSizes(ctx, b, pool, schema)

	// Every call claimed first (the open records, arguments included),
	// then every one completed (the arguments dropped).
	start := time.Now()
	leases := make([]idempotency.Lease, storetest.ReferenceCalls)
	err = storetest.ForEachReferenceCall(sizeWorkers, func(i int) error {
		d, err := store.Claim(ctx, storetest.ReferenceCall(i))
		if err == nil && d.Outcome != idempotency.OutcomeClaimed {
			err = fmt.Errorf("call %d: outcome %v, want claimed", i, d.Outcome)
		}
		leases[i] = d.Lease
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	vacuum(false)
	open := readSizes(ctx, b, pool, schema)
	err = storetest.ForEachReferenceCall(sizeWorkers, func(i int) error {
		return store.Complete(ctx, leases[i], resp, time.Hour)
	})
	if err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)

	vacuum(false)
	after := readSizes(ctx, b, pool, schema)
	if got := after.rows - before.rows; got != storetest.ReferenceCalls {
		b.Fatalf("%d rows stored, want %d", got, storetest.ReferenceCalls)
	}
	vacuum(true)
	packed := readSizes(ctx, b, pool, schema)

	per := func(a, z int64) float64 { return float64(z-a) / storetest.ReferenceCalls }
	b.ReportMetric(per(before.total, open.total), "open-total-B/call")
	b.ReportMetric(per(before.live, open.live), "open-row-B/call")
	b.ReportMetric(per(before.total, after.total), "total-B/call")
	b.ReportMetric(per(before.heap, after.heap), "heap-B/call")
	b.ReportMetric(per(before.indexes, after.indexes), "index-B/call")
	b.ReportMetric(per(before.live, after.live), "row-B/call")
	b.ReportMetric(per(before.total, packed.total), "total-full-B/call")
	b.Logf("%d calls (claim + complete, %d-byte bodies) from %d goroutines in %v", storetest.ReferenceCalls, len(storetest.ReferenceBody), sizeWorkers, elapsed.Round(time.Millisecond))
	b.Logf("after VACUUM ANALYZE: total %d B (%.1f B/call), heap %d B (%.1f B/call), indexes %d B (%.1f B/call), other forks and TOAST %.1f B/call; live rows %.1f B each",
		after.total, per(before.total, after.total), after.heap, per(before.heap, after.heap),
		after.indexes, per(before.indexes, after.indexes),
		per(before.total-before.heap-before.indexes, after.total-after.heap-after.indexes), per(before.live, after.live))
	b.Logf("after VACUUM FULL: total %d B (%.1f B/call), heap %.1f B/call, indexes %.1f B/call",
		packed.total, per(before.total, packed.total), per(before.heap, packed.heap), per(before.indexes, packed.indexes))
	names := slices.Sorted(maps.Keys(after.index))
	for _, name := range names {
		size := after.index[name]
		b.Logf("index %s: %.1f B/call after VACUUM, %.1f B/call after VACUUM FULL",
			name, per(before.index[name], size), per(before.index[name], packed.index[name]))
	}
}
