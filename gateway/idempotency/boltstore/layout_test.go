package boltstore

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// setFileLayout writes a layout version into a closed store file, as a
// newer (or an older) gateway would have.
func setFileLayout(t *testing.T, path string, version int) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	if err := db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(metaBucket)
		if err != nil {
			return err
		}
		return meta.Put(layoutKey, []byte(strconv.Itoa(version)))
	}); err != nil {
		t.Fatal(err)
	}
}

// TestNewerLayoutDecidesNothing: a file written by a newer gateway opens,
// but every operation answers a *LayoutError (the call path's 503) and
// Ping names both versions (/readyz); nothing is written.
func TestNewerLayoutDecidesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gw.db")
	s, err := Open(path, Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	before := claimRequest("before", "fp", nil)
	mustClaim(t, s, before, idempotency.OutcomeClaimed)
	if v, err := s.LayoutVersion(t.Context()); err != nil || v.Found != layoutVersion {
		t.Fatalf("layout version = %+v, %v; want %d", v, err, layoutVersion)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	newer := newestKnownLayout + 1
	setFileLayout(t, path, newer)

	s, err = Open(path, Options{SweepInterval: -1})
	if err != nil {
		t.Fatalf("Open on a newer layout = %v, want a store that refuses to decide", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	_, err = s.Claim(t.Context(), claimRequest("after", "fp", nil))
	var layoutErr *idempotency.LayoutError
	if !errors.As(err, &layoutErr) || layoutErr.Found != newer || layoutErr.Known != newestKnownLayout {
		t.Fatalf("Claim = %v, want a LayoutError %d > %d", err, newer, newestKnownLayout)
	}
	if _, err := s.Get(t.Context(), before.Scope); !errors.Is(err, idempotency.ErrNewerLayout) {
		t.Errorf("Get = %v, want ErrNewerLayout", err)
	}
	if err := s.Ping(t.Context()); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("layout version %d, this gateway knows up to %d", newer, newestKnownLayout)) {
		t.Errorf("Ping = %v, want both versions named", err)
	}
	if v, _ := s.LayoutVersion(t.Context()); v.Found != newer {
		t.Errorf("an older gateway changed the layout version to %d", v.Found)
	}
	if err := s.db.View(func(tx *bolt.Tx) error {
		if n := tx.Bucket(recordsBucket).Stats().KeyN; n != 1 {
			t.Errorf("records in the file: %d, want only the one claimed before", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
