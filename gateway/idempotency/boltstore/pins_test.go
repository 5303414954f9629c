package boltstore

import (
	"path/filepath"
	"testing"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/storetest"
)

// TestPins: the pins survive closing the file and opening it again (a
// gateway restart).
func TestPins(t *testing.T) {
	storetest.RunPins(t, func(t *testing.T) (idempotency.Store, func() idempotency.Store) {
		path := filepath.Join(t.TempDir(), "gw.db")
		open := func() idempotency.Store {
			s, err := Open(path, Options{SweepInterval: -1})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			return s
		}
		s := open()
		t.Cleanup(func() { _ = s.Close() })
		return s, func() idempotency.Store {
			if err := s.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			return open()
		}
	})
}
