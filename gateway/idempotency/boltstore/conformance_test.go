package boltstore

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/storetest"
)

// TestConformance holds the embedded store to the same suite as Redis, on
// the real clock and with the background sweeper running often, so sweeping
// races with the suite's claims.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) idempotency.Store {
		s, err := Open(filepath.Join(t.TempDir(), "gw.db"), Options{SweepInterval: 50 * time.Millisecond})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return s
	})
}
