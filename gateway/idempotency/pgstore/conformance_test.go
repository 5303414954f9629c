package pgstore

import (
	"testing"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/storetest"
)

// TestConformance runs the whole suite, each subtest on a store in a fresh
// schema of its own.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) idempotency.Store {
		s, _ := newTestStore(t, Options{})
		return s
	})
}
