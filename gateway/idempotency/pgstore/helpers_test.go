package pgstore

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolgateway/toolgateway/internal/pgtest"
)

// testPool connects to the test PostgreSQL (the shared one when it
// answers) and closes the pool when the test ends.
func testPool(tb testing.TB, url string) *pgxpool.Pool {
	tb.Helper()
	pool, err := pgxpool.New(tb.Context(), url)
	if err != nil {
		tb.Fatalf("connect: %v", err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

// newTestStore returns a store in a schema of the test's own, which is
// dropped when the test ends; the background sweep is off unless opts
// turns it on.
func newTestStore(tb testing.TB, opts Options) (*Store, *pgxpool.Pool) {
	tb.Helper()
	url := pgtest.URL(tb)
	pool := testPool(tb, url)
	opts.Schema = pgtest.Schema(tb, url)
	if opts.SweepInterval == 0 {
		opts.SweepInterval = -1
	}
	s, err := New(tb.Context(), pool, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s, pool
}

// count returns the number of rows of the store's records table.
func count(tb testing.TB, s *Store, pool *pgxpool.Pool) int {
	tb.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), qualifier(s.schema)("SELECT count(*) FROM @.records")).Scan(&n); err != nil {
		tb.Fatal(err)
	}
	return n
}
