package boltreceipts

import (
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/toolgateway/toolgateway/gateway/receipts/receiptstest"
)

// TestDiskPerReceipt measures what an executed receipt takes in the
// embedded store's file: the pages in use (bbolt's own accounting: the
// database's size less its free pages) after receiptsForSizing receipts,
// logged for docs/receipts.md's sizing table.
func TestDiskPerReceipt(t *testing.T) {
	const receiptsForSizing = 20_000
	db, err := bolt.Open(filepath.Join(t.TempDir(), "gateway.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	s, err := New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	receiptstest.AppendForSizing(t, s, "acme", receiptsForSizing)
	var used int64
	err = db.View(func(tx *bolt.Tx) error {
		used = tx.Size() - int64(db.Stats().FreePageN+db.Stats().PendingPageN)*int64(db.Info().PageSize)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	last, ok, err := s.LastReceipt(t.Context(), "acme")
	if err != nil || !ok || last.Seq != receiptsForSizing {
		t.Fatalf("last receipt: seq %d, %v, %v", last.Seq, ok, err)
	}
	t.Logf("%d receipts: %d bytes of pages in use, %.0f bytes per receipt", receiptsForSizing, used, float64(used)/receiptsForSizing)
}
