package receiptstest

import (
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/receipts"
)

func expireCases() []testCase {
	return []testCase{
		{"ExpireRemovesTheOldestAndKeepsTheHead", expireKeepsHead},
		{"ExpireRemovesOnlyAPrefix", expirePrefixOnly},
	}
}

func expireKeepsHead(t *testing.T, b Backend) {
	s := b.Replicas[0]
	now := time.Now()
	old := now.Add(-receipts.DefaultRetention - time.Hour)
	var chain []receipts.Receipt
	for i := range 4 {
		chain = append(chain, mustAppend(t, s, "acme", event(i, "refund", receipts.EventExecuted, old)))
	}
	for i := 4; i < 7; i++ {
		chain = append(chain, mustAppend(t, s, "acme", event(i, "refund", receipts.EventExecuted, now)))
	}
	for i := range 2 { // a chain that expires whole
		mustAppend(t, s, "gone", event(i, "refund", receipts.EventExecuted, old))
	}
	n, err := s.Expire(t.Context(), now.Add(-receipts.DefaultRetention))
	if err != nil || n != 6 {
		t.Fatalf("Expire = %d, %v; want 6", n, err)
	}
	sameLines(t, listAll(t, s, receipts.Filter{Tenant: "acme"}), chain[4:])
	next := mustAppend(t, b.Replicas[1], "acme", event(7, "refund", receipts.EventExecuted, now))
	if next.Seq != 8 || next.Prev != chain[6].Hash {
		t.Fatalf("after expiry: seq %d prev %s, want 8 after seq 7", next.Seq, next.Prev)
	}
	again := mustAppend(t, b.Replicas[1], "gone", event(9, "refund", receipts.EventExecuted, now))
	if again.Seq != 3 {
		t.Fatalf("fully expired chain continued at seq %d, want 3", again.Seq)
	}
	rep := exportAndVerify(t, s)
	tr := tenantReport(t, rep, "acme")
	if !rep.OK() || tr.First != 5 || tr.Last != 8 || tr.Anchor != chain[3].Hash {
		t.Fatalf("Verify: %+v, want chain 5..8 anchored on seq 4's hash", rep)
	}
}

// A writer with a slow clock may seal a receipt with an older time after a
// newer one; expiry must still leave a contiguous chain, so it stops at the
// first receipt that is not old.
func expirePrefixOnly(t *testing.T, b Backend) {
	s := b.Replicas[0]
	now := time.Now()
	old := now.Add(-48 * time.Hour)
	mustAppend(t, s, "acme", event(0, "refund", receipts.EventExecuted, old))
	mustAppend(t, s, "acme", event(1, "refund", receipts.EventExecuted, now))
	mustAppend(t, s, "acme", event(2, "refund", receipts.EventExecuted, old))
	n, err := s.Expire(t.Context(), now.Add(-time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("Expire = %d, %v; want 1", n, err)
	}
	rep := exportAndVerify(t, s)
	if tr := tenantReport(t, rep, "acme"); tr.Failure != nil || tr.First != 2 || tr.Last != 3 {
		t.Fatalf("Verify: %+v", tr)
	}
}
