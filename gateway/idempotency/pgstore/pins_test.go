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
		s, _ := newTestStore(t, Options{})
		return s, func() idempotency.Store {
			_ = s.Close()
			again, err := New(t.Context(), testPool(t, pgtest.URL(t)), Options{Schema: s.schema, SweepInterval: -1})
			if err != nil {
				t.Fatal(err)
			}
			return again
		}
	})
}
