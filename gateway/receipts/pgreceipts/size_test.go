package pgreceipts

import (
	"testing"

	"github.com/toolgateway/toolgateway/gateway/receipts/receiptstest"
	"github.com/toolgateway/toolgateway/internal/pgtest"
)

// TestDiskPerReceipt measures what an executed receipt takes on
// PostgreSQL's disk: every table of a private schema (receipts, the
// executed index, heads; their indexes and TOAST), by
// pg_total_relation_size, after receiptsForSizing receipts, logged for
// docs/receipts.md's sizing table.
func TestDiskPerReceipt(t *testing.T) {
	const receiptsForSizing = 20_000
	url := pgtest.URL(t)
	schema := pgtest.Schema(t, url)
	pool := newPool(t, url)
	s, err := New(t.Context(), pool, schema, nil)
	if err != nil {
		t.Fatal(err)
	}
	receiptstest.AppendForSizing(t, s, "acme", receiptsForSizing)
	if _, err := pool.Exec(t.Context(), qualifier(schema)("VACUUM ANALYZE @.receipts")); err != nil {
		t.Fatal(err)
	}
	var total int64
	err = pool.QueryRow(t.Context(), `SELECT COALESCE(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r'`, schema).Scan(&total)
	if err != nil {
		t.Fatal(err)
	}
	last, ok, err := s.LastReceipt(t.Context(), "acme")
	if err != nil || !ok || last.Seq != receiptsForSizing {
		t.Fatalf("last receipt: seq %d, %v, %v", last.Seq, ok, err)
	}
	t.Logf("%d receipts: %d bytes on disk, %.0f bytes per receipt", receiptsForSizing, total, float64(total)/receiptsForSizing)
}
