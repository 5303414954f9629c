package pgstore

import (
	"testing"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/storetest"
	"github.com/toolgateway/toolgateway/internal/pgtest"
)

// TestPins: the pins survive a new pool and store on the same schema (a
// gateway restart).
func TestPins(t *testing.T) {
	storetest.RunPins(t, func(t *testing.T) (idempotency.Store, func() idempotency.Store) {
		// One URL for both stores: without a shared server pgtest.URL
		// starts a private one per call, and the restart must find the
		// same database.
		url := pgtest.URL(t)
		opts := Options{Schema: pgtest.Schema(t, url), SweepInterval: -1}
		s, err := New(t.Context(), testPool(t, url), opts)
		if err != nil {
			t.Fatal(err)
		}
		return s, func() idempotency.Store {
			_ = s.Close()
			again, err := New(t.Context(), testPool(t, url), opts)
			if err != nil {
				t.Fatal(err)
			}
			return again
		}
	})
}
