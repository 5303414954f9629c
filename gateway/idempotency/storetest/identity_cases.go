package storetest

import (
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

func identityCases() []testCase {
	return []testCase{
		{"IdentityKeptForTheRecordsLife", testIdentityKept},
	}
}

// testIdentity is a fingerprint identity as the call path describes it.
const testIdentity = `{"kind":"fingerprint","principal":"host-user:op.example:ada","window_start":"2026-12-07T00:00:00Z","window":"24h0m0s"}`

// testIdentityKept: every store keeps identities (IdentityKeeper): it
// shows the claim's identity on the record while IN_PROGRESS, once
// COMPLETED, in Admin.List and FindExecution, unchanged by a replaying
// claim that carries another; through a takeover, an expired lease's
// UNKNOWN, mark-unknown and an operator's resolve; on a pending
// approval, once approved and once its approval is consumed. A claim
// without one leaves the record without.
func testIdentityKept(f *fixture) {
	if keeper, _ := f.store.(idempotency.IdentityKeeper); keeper == nil || !keeper.KeepsIdentity() {
		f.t.Fatalf("%T keeps no identity with its records (idempotency.IdentityKeeper)", f.store)
	}
	req := f.request(f.scope("tool", f.id("key")), fingerprintA, &idempotency.Step{SessionID: "fp:host-user:op.example:ada"})
	req.StepGuard = false
	req.Identity = testIdentity
	lease := f.claimed(req)
	f.expectIdentity(req.Scope, idempotency.StateInProgress, testIdentity)
	f.complete(lease, jsonResponse(`{"ok":true}`), replayTTL)
	again := f.fresh(req)
	again.Identity = `{"kind":"host","host_meta":"x","host_call_id":"y"}`
	f.expect(again, idempotency.OutcomeReplay)
	f.expectIdentity(req.Scope, idempotency.StateCompleted, testIdentity)
	found, err := f.admin().FindExecution(f.ctx, req.ExecutionID)
	if err != nil || found.Identity != testIdentity {
		f.t.Errorf("FindExecution: %v, identity %q, want %q", err, found.Identity, testIdentity)
	}
	listed := f.listAll(idempotency.ListFilter{Tenant: req.Scope.Tenant, Tool: req.Scope.Tool, Limit: 10})
	if len(listed) != 1 || listed[0].Identity != testIdentity {
		f.t.Errorf("List: %d records, identity %q; want 1 with %q", len(listed), firstIdentity(listed), testIdentity)
	}

	// A retry after the lease takes the record over; the lease after that
	// expires into UNKNOWN, which an operator resolves.
	lost := f.request(f.scope("lost", f.id("key")), fingerprintA, nil)
	lost.Identity = testIdentity
	lost.LockTTL = shortLease
	f.claimed(lost)
	time.Sleep(expireWait)
	retry := f.fresh(lost)
	if d := f.expect(retry, idempotency.OutcomeClaimed); !d.TakenOver {
		f.t.Fatalf("retry after the lease: %+v, want a takeover", d)
	}
	f.expectIdentity(lost.Scope, idempotency.StateInProgress, testIdentity)
	time.Sleep(expireWait)
	late := f.fresh(retry)
	late.LeaseExpiry = idempotency.LeaseExpiryUnknown
	f.expect(late, idempotency.OutcomeUnknown)
	f.expectIdentity(lost.Scope, idempotency.StateUnknown, testIdentity)
	if got := f.resolve(lost.Scope, jsonResponse(`{"by":"operator"}`), replayTTL); got.Identity != testIdentity {
		f.t.Errorf("Resolve answered identity %q, want %q", got.Identity, testIdentity)
	}
	f.expectIdentity(lost.Scope, idempotency.StateCompleted, testIdentity)

	// An owner that cannot tell whether its effect happened marks it.
	unsure := f.request(f.scope("unsure", f.id("key")), fingerprintA, nil)
	unsure.Identity = testIdentity
	f.markUnknown(f.claimed(unsure), replayTTL)
	f.expectIdentity(unsure.Scope, idempotency.StateUnknown, testIdentity)

	// A call held for approval: pending, approved, then consumed by the
	// repeat, which runs it.
	held := f.approvalRequest(f.scope("refund", f.id("key")), fingerprintA, nil)
	held.Identity = testIdentity
	a := f.pending(held)
	f.expectIdentity(held.Scope, idempotency.StateAwaitingApproval, testIdentity)
	f.decide(a.ID, true, "oidc:idp.example.com:ops", "")
	f.expectIdentity(held.Scope, idempotency.StateApproved, testIdentity)
	run := f.again(held)
	run.Approval = nil
	f.complete(f.claimed(run), jsonResponse(`{"refunded":true}`), replayTTL)
	f.expectIdentity(held.Scope, idempotency.StateCompleted, testIdentity)

	plain := f.request(f.scope("tool", f.id("key")), fingerprintA, nil)
	f.claimed(plain)
	f.expectIdentity(plain.Scope, idempotency.StateInProgress, "")
}

// expectIdentity requires scope's record in state want with identity id.
func (f *fixture) expectIdentity(scope idempotency.Scope, want idempotency.State, id string) {
	f.t.Helper()
	if got := f.get(scope); got.State != want || got.Identity != id {
		f.t.Errorf("%s record: identity %q, want %s with %q", got.State, got.Identity, want, id)
	}
}

func firstIdentity(recs []idempotency.Record) string {
	if len(recs) == 0 {
		return ""
	}
	return recs[0].Identity
}
