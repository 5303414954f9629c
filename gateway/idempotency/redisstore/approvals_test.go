package redisstore

import (
	"errors"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

func approvalRequest(key string) idempotency.ClaimRequest {
	return idempotency.ClaimRequest{
		Scope:       idempotency.Scope{Tenant: "t", Tool: "refund", Key: key},
		Fingerprint: "fp", Step: &idempotency.Step{SessionID: "s-" + key, Index: 1}, StepGuard: true, StepBoundKey: true,
		ExecutionID: ulid.Make().String(), Owner: ulid.Make().String(),
		LockTTL: time.Minute, ReplayTTL: time.Hour, LeaseExpiry: idempotency.LeaseExpiryUnknown,
		CanonicalArguments: []byte(`{"amount":2000}`),
		Approval: &idempotency.ApprovalClaim{ID: ulid.Make().String(), Rule: 1, Reason: "finance decides",
			Approver: idempotency.ApproverCaller, Timeout: time.Hour, UseWithin: time.Hour},
	}
}

// TestApprovalRoundTrips pins what approvals cost on Redis: a waiting call
// two round trips per claim (the claim script, then the approval index
// with its listing sets, one pipeline), deciding four (index, record,
// script, leaving the pending set), and the approved run the usual one
// claim, which consumes the approval, plus its completion.
func TestApprovalRoundTrips(t *testing.T) {
	client := testClient(t)
	counter := &roundTrips{}
	client.AddHook(counter)
	store := New(client, Options{Prefix: uniquePrefix(t, client)})
	ctx := t.Context()
	// Load the scripts (a script Redis has not seen costs one round trip
	// more, NOSCRIPT then EVAL).
	warm, err := store.Claim(ctx, approvalRequest("warm"))
	if err != nil || warm.Approval == nil {
		t.Fatalf("warm-up claim: %v %v", warm.Outcome, err)
	}
	if _, err := store.DecideApproval(ctx, warm.Approval.ID, idempotency.ApprovalDecision{Approve: true, By: "t"}); err != nil {
		t.Fatal(err)
	}

	req := approvalRequest("budget")
	var d idempotency.Decision
	pending := counter.cost(t, func() (err error) { d, err = store.Claim(ctx, req); return err })
	if d.Outcome != idempotency.OutcomeAwaitingApproval || d.Approval.Approver != idempotency.ApproverCaller {
		t.Fatalf("first claim: %v %+v", d.Outcome, d.Approval)
	}
	id := d.Approval.ID
	retry := counter.cost(t, func() (err error) { d, err = store.Claim(ctx, req); return err })
	decide := counter.cost(t, func() error {
		_, err := store.DecideApproval(ctx, id, idempotency.ApprovalDecision{Approve: true, By: "t"})
		return err
	})
	run := req
	run.ExecutionID, run.Owner = ulid.Make().String(), ulid.Make().String()
	consume := counter.cost(t, func() (err error) { d, err = store.Claim(ctx, run); return err })
	if d.Outcome != idempotency.OutcomeClaimed || d.Approval == nil || d.Approval.DecidedBy != "t" {
		t.Fatalf("consuming claim: %v %+v", d.Outcome, d.Approval)
	}
	complete := counter.cost(t, func() error {
		return store.Complete(ctx, d.Lease, idempotency.StoredResponse{Status: 200, Body: []byte(`{}`)}, time.Hour)
	})
	if pending != 2 || retry != 2 || decide != 4 || consume+complete != 2 {
		t.Errorf("round trips: pending %d (want 2), retry %d (want 2), decide %d (want 4), approved run %d (want 2)",
			pending, retry, decide, consume+complete)
	}
}

// TestApprovalIndexHeals: the index entry is only a pointer. Lost, the
// approval cannot be found by id, and the call's next retry writes it
// again; pointing at a record that no longer carries the approval, it
// finds nothing.
func TestApprovalIndexHeals(t *testing.T) {
	client := testClient(t)
	store := New(client, Options{Prefix: uniquePrefix(t, client)})
	ctx := t.Context()
	req := approvalRequest("heal")
	d, err := store.Claim(ctx, req)
	if err != nil || d.Outcome != idempotency.OutcomeAwaitingApproval {
		t.Fatalf("claim: %v %v", d.Outcome, err)
	}
	id := d.Approval.ID
	if err := client.Del(ctx, store.keys.approval(id)).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := store.GetApproval(ctx, id); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("GetApproval without its index = %v, want ErrNotFound", err)
	}
	retry := req
	retry.Approval = &idempotency.ApprovalClaim{ID: ulid.Make().String(), Timeout: time.Hour, UseWithin: time.Hour}
	if d, err := store.Claim(ctx, retry); err != nil || d.Approval.ID != id {
		t.Fatalf("retry: %+v, %v; want the stored approval %s", d.Approval, err, id)
	}
	rec, err := store.GetApproval(ctx, id)
	if err != nil || rec.State != idempotency.StateAwaitingApproval || string(rec.CanonicalArguments) != `{"amount":2000}` {
		t.Fatalf("GetApproval after the retry: %+v, %v", rec, err)
	}
	// The retry's own approval id points nowhere: it was not stored.
	if _, err := store.GetApproval(ctx, retry.Approval.ID); !errors.Is(err, idempotency.ErrNotFound) {
		t.Errorf("GetApproval of the retry's unused id = %v, want ErrNotFound", err)
	}
	// A pointer at a record that carries no approval (deleted, then the
	// call allowed and run) leads nowhere either.
	if err := store.Delete(ctx, req.Scope); err != nil {
		t.Fatal(err)
	}
	allowed := req
	allowed.Approval = nil
	if d, err := store.Claim(ctx, allowed); err != nil || d.Outcome != idempotency.OutcomeClaimed {
		t.Fatalf("allowed claim: %v %v", d.Outcome, err)
	}
	if _, err := store.DecideApproval(ctx, id, idempotency.ApprovalDecision{Approve: true, By: "op"}); !errors.Is(err, idempotency.ErrNotFound) {
		t.Errorf("DecideApproval through a stale pointer = %v, want ErrNotFound", err)
	}
	if got, err := store.Get(ctx, req.Scope); err != nil || got.State != idempotency.StateInProgress {
		t.Errorf("the stale pointer's decision changed the record: %+v, %v", got, err)
	}
}
