package boltstore

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// A file MarkNewerLayout wrote opens, and decides nothing: its layout is
// one above the newest this build knows.
func TestMarkNewerLayout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gw.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := MarkNewerLayout(path); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	v, err := s.LayoutVersion(t.Context())
	if err != nil || v.Found != newestKnownLayout+1 {
		t.Fatalf("layout %+v, %v; want found %d", v, err, newestKnownLayout+1)
	}
	if err := v.Check("embedded"); !errors.Is(err, idempotency.ErrNewerLayout) {
		t.Fatalf("Check = %v, want ErrNewerLayout", err)
	}
}
