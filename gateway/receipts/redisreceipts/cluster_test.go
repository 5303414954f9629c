package redisreceipts_test

import (
	"slices"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/receipts"
	"github.com/toolgateway/toolgateway/gateway/receipts/receiptstest"
	"github.com/toolgateway/toolgateway/gateway/receipts/redisreceipts"
	"github.com/toolgateway/toolgateway/internal/redistest"
)

// TestConformanceOnCluster runs the suite on a three-master Redis Cluster:
// the append script touches two keys, which the cluster refuses
// (CROSSSLOT) unless the tenant's hash tag puts them in one slot. The
// cluster is private and killed at the end, so no key is cleaned.
func TestConformanceOnCluster(t *testing.T) {
	cluster := redistest.StartCluster(t, 3)
	receiptstest.Run(t, func(t *testing.T) receiptstest.Backend {
		c1, c2 := cluster.Client(), cluster.Client()
		t.Cleanup(func() { _ = c1.Close(); _ = c2.Close() })
		prefix := redistest.Prefix("gwtest-receipts")
		return receiptstest.Backend{
			Replicas: [2]receipts.Store{redisreceipts.New(c1, prefix, nil), redisreceipts.New(c2, prefix, nil)},
			Open: func(t *testing.T) receipts.Store {
				c := cluster.Client()
				t.Cleanup(func() { _ = c.Close() })
				return redisreceipts.New(c, prefix, nil)
			},
			Raw: raw{client: c1, prefix: prefix},
		}
	})
	// Sealed segments on the cluster: the compaction script's two keys
	// share the chain's slot; reads, verify and expiry see every line.
	t.Run("Segments", func(t *testing.T) {
		c := cluster.Client()
		t.Cleanup(func() { _ = c.Close() })
		start := time.Now().Add(-48 * time.Hour)
		s := redisreceipts.New(c, redistest.Prefix("gwtest-receipts"), newTestClock(start).Now)
		want := segmentedChain(t, s, 2*redisreceipts.SegmentSize+10, start)
		if got := storedLines(t, s); !slices.Equal(got, want) {
			t.Fatalf("read %d lines, not the %d written", len(got), len(want))
		}
		if removed, err := s.Expire(t.Context(), start.Add(300*time.Second+time.Millisecond)); err != nil || removed != 301 {
			t.Fatalf("Expire: %d, %v", removed, err)
		}
		if tr := verifyAcme(t, s); tr.Failure != nil || tr.First != 302 || tr.Last != int64(len(want)) {
			t.Fatalf("verify: %+v", tr)
		}
	})
}
