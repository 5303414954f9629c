package storetest

import (
	"errors"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// reconcileCases hold a store implementing idempotency.Reconciler to its
// contract; a store that does not implement it skips them (reconciliation
// is then not offered on it: the gateway refuses reconcile: config).
func reconcileCases() []testCase {
	return []testCase{
		{"ReconcileCompletesUnknown", testReconcileCompletesUnknown},
		{"ReconcileDropLetsNextCallRun", testReconcileDrop},
		{"ReconcileOneOwnerAtATime", testReconcileOneOwner},
		{"ReconcileAbandonedInProgress", testReconcileAbandoned},
		{"ReconcileRefusesOtherStates", testReconcileRefusesOtherStates},
		{"ReconcileAfterOperatorResolvedIsLeaseLost", testReconcileAfterOperator},
		{"ReconcileStateBelongsToItsClaim", testReconcileStateBelongsToItsClaim},
	}
}

func (f *fixture) reconciler() idempotency.Reconciler {
	f.t.Helper()
	r, ok := f.store.(idempotency.Reconciler)
	if !ok {
		f.t.Skip("store does not implement idempotency.Reconciler")
	}
	return r
}

// unknownRecord claims a record and marks it UNKNOWN.
func (f *fixture) unknownRecord(tool string) (idempotency.ClaimRequest, idempotency.Lease) {
	f.t.Helper()
	req := f.request(f.scope(tool, f.id("key")), fingerprintA, f.step(f.id("s"), 1))
	req.LeaseExpiry = idempotency.LeaseExpiryUnknown
	req.CanonicalArguments = []byte(`{"amount":5}`)
	lease := f.claimed(req)
	f.markUnknown(lease, replayTTL)
	return req, lease
}

func testReconcileCompletesUnknown(f *fixture) {
	rc := f.reconciler()
	req, lease := f.unknownRecord("refund")
	owner := f.id("reconciler")
	rec, err := rc.ClaimReconcile(f.ctx, req.Scope, owner, longLease)
	if err != nil {
		f.t.Fatalf("ClaimReconcile: %v", err)
	}
	if rec.FencingToken != lease.FencingToken || string(rec.CanonicalArguments) != `{"amount":5}` || rec.ExecutionID != req.ExecutionID {
		f.t.Fatalf("claimed record = %+v, want the UNKNOWN record with its arguments", rec)
	}
	at := time.Now().Truncate(time.Millisecond)
	for _, outcome := range []string{"error", "unknown"} {
		if _, err := rc.RecordReconcileAttempt(f.ctx, req.Scope, owner, lease.FencingToken, idempotency.ReconcileAttempt{At: at, Outcome: outcome, Detail: "d"}); err != nil {
			f.t.Fatalf("RecordReconcileAttempt: %v", err)
		}
	}
	got := f.get(req.Scope)
	if got.Reconciliation == nil || got.Reconciliation.Count != 2 || len(got.Reconciliation.Attempts) != 2 ||
		got.Reconciliation.Attempts[1].Outcome != "unknown" || !within(got.Reconciliation.Attempts[0].At, at, timeSlack) {
		f.t.Fatalf("reconciliation = %+v, want two attempts", got.Reconciliation)
	}
	resp := jsonResponse(`{"refund":"r_1"}`)
	resp.Status = 201
	done, err := rc.CompleteReconciled(f.ctx, req.Scope, owner, lease.FencingToken, resp, replayTTL)
	if err != nil {
		f.t.Fatalf("CompleteReconciled: %v", err)
	}
	if done.State != idempotency.StateCompleted || done.ResolvedBy != idempotency.ResolvedByReconcile {
		f.t.Fatalf("completed record = %+v", done)
	}
	d := f.expect(f.fresh(req), idempotency.OutcomeReplay)
	if !sameResponse(d.Response, resp) || d.ExecutionID != req.ExecutionID {
		f.t.Fatalf("replay = %+v, want the reconciled response under the same execution id", d)
	}
	if got := f.get(req.Scope); got.ResolvedBy != idempotency.ResolvedByReconcile || got.Reconciliation == nil || got.Reconciliation.Count != 2 {
		f.t.Fatalf("stored record after reconcile = %+v", got)
	}
}

func testReconcileDrop(f *fixture) {
	rc := f.reconciler()
	req, lease := f.unknownRecord("refund")
	owner := f.id("reconciler")
	if _, err := rc.ClaimReconcile(f.ctx, req.Scope, owner, longLease); err != nil {
		f.t.Fatalf("ClaimReconcile: %v", err)
	}
	if err := rc.DropReconciled(f.ctx, req.Scope, "someone-else", lease.FencingToken); !errors.Is(err, idempotency.ErrLeaseLost) {
		f.t.Fatalf("DropReconciled by a non-owner = %v, want ErrLeaseLost", err)
	}
	if err := rc.DropReconciled(f.ctx, req.Scope, owner, lease.FencingToken+1); !errors.Is(err, idempotency.ErrLeaseLost) {
		f.t.Fatalf("DropReconciled with another fencing token = %v, want ErrLeaseLost", err)
	}
	if err := rc.DropReconciled(f.ctx, req.Scope, owner, lease.FencingToken); err != nil {
		f.t.Fatalf("DropReconciled: %v", err)
	}
	f.expectNotFound(req.Scope)
	next := f.fresh(req)
	d := f.expect(next, idempotency.OutcomeClaimed)
	if d.Lease.FencingToken <= lease.FencingToken {
		f.t.Fatalf("fencing token after drop = %d, want > %d", d.Lease.FencingToken, lease.FencingToken)
	}
}

func testReconcileOneOwner(f *fixture) {
	rc := f.reconciler()
	req, lease := f.unknownRecord("refund")
	first, second := f.id("reconciler"), f.id("reconciler")
	if _, err := rc.ClaimReconcile(f.ctx, req.Scope, first, shortLease); err != nil {
		f.t.Fatalf("ClaimReconcile: %v", err)
	}
	if _, err := rc.ClaimReconcile(f.ctx, req.Scope, second, longLease); !errors.Is(err, idempotency.ErrReconcileHeld) {
		f.t.Fatalf("second ClaimReconcile while held = %v, want ErrReconcileHeld", err)
	}
	time.Sleep(expireWait)
	if _, err := rc.ClaimReconcile(f.ctx, req.Scope, second, longLease); err != nil {
		f.t.Fatalf("ClaimReconcile after the lease expired: %v", err)
	}
	if _, err := rc.RecordReconcileAttempt(f.ctx, req.Scope, first, lease.FencingToken, idempotency.ReconcileAttempt{At: time.Now(), Outcome: "unknown"}); !errors.Is(err, idempotency.ErrLeaseLost) {
		f.t.Fatalf("attempt by the replaced owner = %v, want ErrLeaseLost", err)
	}
	if _, err := rc.CompleteReconciled(f.ctx, req.Scope, first, lease.FencingToken, jsonResponse(`{}`), replayTTL); !errors.Is(err, idempotency.ErrLeaseLost) {
		f.t.Fatalf("completion by the replaced owner = %v, want ErrLeaseLost", err)
	}
	if got := f.get(req.Scope); got.State != idempotency.StateUnknown {
		f.t.Fatalf("state = %s, want UNKNOWN", got.State)
	}
}

func testReconcileAbandoned(f *fixture) {
	rc := f.reconciler()
	req := f.request(f.scope("refund", f.id("key")), fingerprintA, nil)
	req.LeaseExpiry = idempotency.LeaseExpiryUnknown
	// A lease that a loaded machine cannot outrun between the claim and
	// the first ClaimReconcile (150 ms was, under -race on two busy cores).
	req.LockTTL = time.Second
	claimedAt := time.Now()
	lease := f.claimed(req)
	owner := f.id("reconciler")
	if _, err := rc.ClaimReconcile(f.ctx, req.Scope, owner, longLease); !errors.Is(err, idempotency.ErrNotResolvable) {
		f.t.Fatalf("ClaimReconcile of a live IN_PROGRESS record = %v, want ErrNotResolvable", err)
	}
	time.Sleep(time.Until(claimedAt.Add(req.LockTTL + expireWait - shortLease)))
	rec, err := rc.ClaimReconcile(f.ctx, req.Scope, owner, longLease)
	if err != nil {
		f.t.Fatalf("ClaimReconcile of an abandoned record: %v", err)
	}
	if rec.State != idempotency.StateUnknown || rec.FencingToken != lease.FencingToken {
		f.t.Fatalf("abandoned record claimed = %+v, want UNKNOWN with its token", rec)
	}
	// Its first owner can no longer record an outcome.
	if err := f.store.Complete(f.ctx, lease, jsonResponse(`{}`), replayTTL); !errors.Is(err, idempotency.ErrLeaseLost) {
		f.t.Fatalf("Complete by the first owner after reconcile took it = %v, want ErrLeaseLost", err)
	}
}

func testReconcileRefusesOtherStates(f *fixture) {
	rc := f.reconciler()
	req := f.request(f.scope("refund", f.id("key")), fingerprintA, nil)
	lease := f.claimed(req)
	f.complete(lease, jsonResponse(`{}`), replayTTL)
	if _, err := rc.ClaimReconcile(f.ctx, req.Scope, f.id("r"), longLease); !errors.Is(err, idempotency.ErrNotResolvable) {
		f.t.Fatalf("ClaimReconcile of a COMPLETED record = %v, want ErrNotResolvable", err)
	}
	if _, err := rc.ClaimReconcile(f.ctx, f.scope("refund", f.id("none")), f.id("r"), longLease); !errors.Is(err, idempotency.ErrNotFound) {
		f.t.Fatalf("ClaimReconcile of no record = %v, want ErrNotFound", err)
	}
}

func testReconcileAfterOperator(f *fixture) {
	rc := f.reconciler()
	req, lease := f.unknownRecord("refund")
	owner := f.id("reconciler")
	if _, err := rc.ClaimReconcile(f.ctx, req.Scope, owner, longLease); err != nil {
		f.t.Fatalf("ClaimReconcile: %v", err)
	}
	operator := jsonResponse(`{"by":"operator"}`)
	if _, err := f.admin().Resolve(f.ctx, req.Scope, operator, replayTTL); err != nil {
		f.t.Fatalf("Resolve: %v", err)
	}
	if err := rc.DropReconciled(f.ctx, req.Scope, owner, lease.FencingToken); !errors.Is(err, idempotency.ErrLeaseLost) {
		f.t.Fatalf("DropReconciled after an operator resolved = %v, want ErrLeaseLost", err)
	}
	d := f.expect(f.fresh(req), idempotency.OutcomeReplay)
	if !sameResponse(d.Response, operator) {
		f.t.Fatalf("replay = %+v, want the operator's response", d.Response)
	}
}

// A record deleted by an operator and claimed again under the same key
// starts without the former claim's reconciliation.
func testReconcileStateBelongsToItsClaim(f *fixture) {
	rc := f.reconciler()
	req, lease := f.unknownRecord("refund")
	owner := f.id("reconciler")
	if _, err := rc.ClaimReconcile(f.ctx, req.Scope, owner, longLease); err != nil {
		f.t.Fatalf("ClaimReconcile: %v", err)
	}
	if _, err := rc.RecordReconcileAttempt(f.ctx, req.Scope, owner, lease.FencingToken, idempotency.ReconcileAttempt{At: time.Now(), Outcome: "unknown"}); err != nil {
		f.t.Fatalf("RecordReconcileAttempt: %v", err)
	}
	f.delete(req.Scope)
	again := f.fresh(req)
	next := f.claimed(again)
	f.markUnknown(next, replayTTL)
	if got := f.get(req.Scope); got.Reconciliation != nil && got.Reconciliation.Count != 0 {
		f.t.Fatalf("new claim shows the former reconciliation %+v", got.Reconciliation)
	}
	rec, err := rc.ClaimReconcile(f.ctx, req.Scope, f.id("reconciler"), longLease)
	if err != nil {
		f.t.Fatalf("ClaimReconcile of the new record (the former owner's lease belongs to the old claim): %v", err)
	}
	if rec.FencingToken != next.FencingToken || (rec.Reconciliation != nil && rec.Reconciliation.Count != 0) {
		f.t.Fatalf("claimed %+v", rec)
	}
}
