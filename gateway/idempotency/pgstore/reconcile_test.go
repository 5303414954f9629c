package pgstore

import (
	"strconv"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// TestReconcileKeepsTheLatestAttempts: the count goes on past
// MaxReconcileAttemptsKept while the row keeps the latest attempts, oldest
// first; List shows the reconciliation and resolved_by once completed, as
// Get does.
func TestReconcileKeepsTheLatestAttempts(t *testing.T) {
	s, _ := newTestStore(t, Options{})
	ctx := t.Context()
	req := benchRequest(1)
	req.LeaseExpiry = idempotency.LeaseExpiryUnknown
	d, err := s.Claim(ctx, req)
	if err != nil || d.Outcome != idempotency.OutcomeClaimed {
		t.Fatalf("claim: %v %v", d.Outcome, err)
	}
	if err := s.MarkUnknown(ctx, d.Lease, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ClaimReconcile(ctx, req.Scope, "reconciler", time.Minute); err != nil {
		t.Fatalf("ClaimReconcile: %v", err)
	}
	total := idempotency.MaxReconcileAttemptsKept + 3
	for i := 1; i <= total; i++ {
		a := idempotency.ReconcileAttempt{At: time.Now(), Outcome: "unknown", Detail: strconv.Itoa(i)}
		if _, err := s.RecordReconcileAttempt(ctx, req.Scope, "reconciler", d.Lease.FencingToken, a); err != nil {
			t.Fatalf("attempt %d: %v", i, err)
		}
	}
	rec, err := s.Get(ctx, req.Scope)
	if err != nil {
		t.Fatal(err)
	}
	rc := rec.Reconciliation
	if rc == nil || rc.Count != total || len(rc.Attempts) != idempotency.MaxReconcileAttemptsKept ||
		rc.Attempts[0].Detail != "4" || rc.Attempts[len(rc.Attempts)-1].Detail != strconv.Itoa(total) || rc.Owner != "reconciler" {
		t.Fatalf("reconciliation = %+v, want count %d and attempts 4..%d", rc, total, total)
	}

	if _, err := s.CompleteReconciled(ctx, req.Scope, "reconciler", d.Lease.FencingToken, benchResponse, time.Hour); err != nil {
		t.Fatalf("CompleteReconciled: %v", err)
	}
	page, err := s.List(ctx, idempotency.ListFilter{Tenant: req.Scope.Tenant, Tool: req.Scope.Tool, Limit: 10})
	if err != nil || len(page.Records) != 1 {
		t.Fatalf("List = %+v, %v", page, err)
	}
	listed := page.Records[0]
	if listed.ResolvedBy != idempotency.ResolvedByReconcile || listed.Reconciliation == nil ||
		listed.Reconciliation.Count != total || listed.Reconciliation.Owner != "" {
		t.Fatalf("listed record = %+v, reconciliation %+v", listed, listed.Reconciliation)
	}
}
