package boltstore

import (
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// approvalEntries counts the approvals bucket's entries.
func approvalEntries(t *testing.T, s *Store) int {
	t.Helper()
	n := 0
	if err := s.db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(approvalsBucket).Stats().KeyN
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestApprovalEntriesLeaveWithTheirRecord: the id index never outlives
// the record it points at — swept, or replaced after expiring before the
// sweeper came; a consumed approval keeps its entry while its record
// lives (history).
func TestApprovalEntriesLeaveWithTheirRecord(t *testing.T) {
	clock := newFakeClock()
	s := openTestStore(t, clock)
	approval := func(req idempotency.ClaimRequest) idempotency.ClaimRequest {
		req.Approval = &idempotency.ApprovalClaim{ID: newID("approval"), Timeout: time.Hour, UseWithin: time.Hour}
		return req
	}

	consumed := approval(claimRequest("consumed", "fp", nil))
	id := mustClaim(t, s, consumed, idempotency.OutcomeAwaitingApproval).Approval.ID
	if _, err := s.DecideApproval(t.Context(), id, idempotency.ApprovalDecision{Approve: true, By: "op"}); err != nil {
		t.Fatal(err)
	}
	consumed.Owner, consumed.ExecutionID = newID("owner"), newID("exec")
	mustClaim(t, s, consumed, idempotency.OutcomeClaimed)
	if n := approvalEntries(t, s); n != 1 {
		t.Fatalf("%d entries after the approval was consumed, want 1 (its record keeps it)", n)
	}

	replaced := approval(claimRequest("replaced", "fp", nil))
	mustClaim(t, s, replaced, idempotency.OutcomeAwaitingApproval)
	swept := approval(claimRequest("swept", "fp", nil))
	mustClaim(t, s, swept, idempotency.OutcomeAwaitingApproval)
	clock.Advance(time.Hour + replaced.ReplayTTL) // all three records are dead now
	replaced.Approval, replaced.Owner, replaced.ExecutionID = nil, newID("owner"), newID("exec")
	mustClaim(t, s, replaced, idempotency.OutcomeClaimed)
	if n := approvalEntries(t, s); n != 2 {
		t.Fatalf("%d entries after an expired approval record was replaced, want 2 (the unswept ones)", n)
	}
	if _, err := s.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := approvalEntries(t, s); n != 0 {
		t.Fatalf("%d entries after the sweep, want 0", n)
	}
}
