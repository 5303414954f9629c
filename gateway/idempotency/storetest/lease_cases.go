package storetest

import (
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

func leaseCases() []testCase {
	return []testCase{
		{"TakeoverRerun", testTakeoverRerun},
		{"LeaseExpiryUnknown", testLeaseExpiryUnknown},
		{"UnknownExpiresAfterReplayTTL", testUnknownExpires},
		{"FencingTokensGrow", testFencingTokensGrow},
		{"RenewExtendsLease", testRenewExtendsLease},
		{"NonOwnerChangesNothing", testNonOwnerChangesNothing},
		{"FinishedLeaseIsLost", testFinishedLeaseIsLost},
		{"CompleteTTL", testCompleteTTL},
	}
}

func testTakeoverRerun(f *fixture) {
	step := f.step("takeover", 7)
	first := f.request(f.scope("tool", "key"), fingerprintA, step)
	first.LockTTL = shortLease
	oldLease := f.claimed(first)
	time.Sleep(expireWait)

	second := f.fresh(first)
	second.LockTTL = longLease
	d := f.expect(second, idempotency.OutcomeClaimed)
	if !d.TakenOver {
		f.t.Errorf("claim after lease expiry: TakenOver = false")
	}
	f.checkLease(second, d)
	if d.Lease.FencingToken <= oldLease.FencingToken {
		f.t.Errorf("takeover fencing token %d, want > %d", d.Lease.FencingToken, oldLease.FencingToken)
	}

	// The old owner can no longer touch the record.
	f.expectLeaseLost(oldLease, "old owner after takeover")
	rec := f.get(first.Scope)
	if rec.State != idempotency.StateInProgress || rec.ExecutionID != second.ExecutionID || rec.FencingToken != d.Lease.FencingToken {
		f.t.Errorf("after the old owner's attempts the record is %+v, want IN_PROGRESS of %q token %d", rec, second.ExecutionID, d.Lease.FencingToken)
	}
	// The new owner holds the step, and runs the record to completion.
	f.expectConflict(f.request(f.scope("tool", "other"), fingerprintB, step), "tool", second.ExecutionID)
	f.expect(f.fresh(first), idempotency.OutcomeInProgress)
	resp := jsonResponse(`{"by":"second"}`)
	f.complete(d.Lease, resp, replayTTL)
	replay := f.expect(f.fresh(first), idempotency.OutcomeReplay)
	if replay.ExecutionID != second.ExecutionID || !sameResponse(replay.Response, resp) {
		f.t.Errorf("replay after takeover = %+v, want execution %q and %+v", replay, second.ExecutionID, resp)
	}
}

// expireIntoUnknown claims req with a short lease, lets it expire and turns
// it UNKNOWN; it returns the dead owner's lease.
func (f *fixture) expireIntoUnknown(req idempotency.ClaimRequest) idempotency.Lease {
	f.t.Helper()
	req.LockTTL = shortLease
	req.LeaseExpiry = idempotency.LeaseExpiryUnknown
	lease := f.claimed(req)
	time.Sleep(expireWait)
	d := f.expect(f.fresh(req), idempotency.OutcomeUnknown)
	if d.ExecutionID != req.ExecutionID {
		f.t.Errorf("unknown execution id = %q, want the lost execution %q", d.ExecutionID, req.ExecutionID)
	}
	if d.Lease.Owner != "" || d.TakenOver || d.Response != nil {
		f.t.Errorf("unknown decision carries a lease or response: %+v", d)
	}
	return lease
}

func testLeaseExpiryUnknown(f *fixture) {
	step := f.step("unknown", 2)
	req := f.request(f.scope("pay", "key"), fingerprintA, step)
	lostLease := f.expireIntoUnknown(req)

	// UNKNOWN stays, whatever policy later requests carry.
	for _, policy := range []idempotency.LeaseExpiry{idempotency.LeaseExpiryUnknown, idempotency.LeaseExpiryRerun} {
		later := f.fresh(req)
		later.LeaseExpiry = policy
		f.expect(later, idempotency.OutcomeUnknown)
	}
	// The gateway that lost the lease may still finish: it must not
	// overwrite the verdict a human has to take.
	f.expectLeaseLost(lostLease, "owner of a lease that turned UNKNOWN")
	rec := f.get(req.Scope)
	if rec.State != idempotency.StateUnknown || rec.ExecutionID != req.ExecutionID || rec.Fingerprint != fingerprintA || rec.Response != nil {
		f.t.Errorf("record = %+v, want UNKNOWN of %q without response", rec, req.ExecutionID)
	}
	// The UNKNOWN record still holds its step.
	f.expectConflict(f.request(f.scope("pay", "other"), fingerprintB, step), "pay", req.ExecutionID)

	// An operator resolves it by deleting the record: the next call runs.
	f.delete(req.Scope)
	f.claimed(f.fresh(req))
}

func testUnknownExpires(f *fixture) {
	const ttl = 600 * time.Millisecond
	req := f.request(f.scope("pay", "key"), fingerprintA, f.step("unknown-ttl", 1))
	req.ReplayTTL = ttl
	f.expireIntoUnknown(req)
	marked := time.Now()
	rec := f.get(req.Scope)
	if !within(rec.ExpiresAt, marked.Add(ttl), clockSlack) {
		f.t.Errorf("UNKNOWN ExpiresAt = %v, want about %v", rec.ExpiresAt, marked.Add(ttl))
	}
	time.Sleep(ttl + expireWait)
	f.expectNotFound(req.Scope)
	f.claimed(f.fresh(req))
}

func testFencingTokensGrow(f *fixture) {
	req := f.request(f.scope("tool", "key"), fingerprintA, f.step("fencing", 1))
	var last int64
	grows := func(lease idempotency.Lease, after string) {
		f.t.Helper()
		if lease.FencingToken <= last {
			f.t.Errorf("fencing token after %s = %d, want > %d", after, lease.FencingToken, last)
		}
		last = lease.FencingToken
	}
	lease := f.claimed(req)
	grows(lease, "first claim")

	f.release(lease)
	lease = f.claimed(f.fresh(req))
	grows(lease, "release")

	f.delete(req.Scope)
	lease = f.claimed(f.fresh(req))
	grows(lease, "delete of an IN_PROGRESS record")

	f.complete(lease, jsonResponse(`{}`), replayTTL)
	f.delete(req.Scope)
	short := f.fresh(req)
	short.LockTTL = shortLease
	lease = f.claimed(short)
	grows(lease, "delete of a COMPLETED record")

	time.Sleep(expireWait)
	d := f.expect(f.fresh(req), idempotency.OutcomeClaimed)
	grows(d.Lease, "takeover")
	if rec := f.get(req.Scope); rec.FencingToken != last {
		f.t.Errorf("record fencing token = %d, want the current owner's %d", rec.FencingToken, last)
	}
}

func testRenewExtendsLease(f *fixture) {
	const renewed = 3 * time.Second
	req := f.request(f.scope("tool", "key"), fingerprintA, f.step("renew", 1))
	req.LockTTL = shortLease
	lease := f.claimed(req)
	beforeRenew := time.Now()
	if err := f.store.Renew(f.ctx, lease, renewed); err != nil {
		f.t.Fatalf("Renew: %v", err)
	}
	afterRenew := time.Now()
	rec := f.get(req.Scope)
	if rec.LeaseExpiresAt.Before(beforeRenew.Add(renewed-clockSlack)) || rec.LeaseExpiresAt.After(afterRenew.Add(renewed+clockSlack)) {
		f.t.Errorf("LeaseExpiresAt after Renew = %v, want about %v", rec.LeaseExpiresAt, beforeRenew.Add(renewed))
	}
	if rec.ExpiresAt.Before(rec.LeaseExpiresAt) {
		f.t.Errorf("ExpiresAt %v is before LeaseExpiresAt %v: an expired lease must stay visible", rec.ExpiresAt, rec.LeaseExpiresAt)
	}

	time.Sleep(expireWait) // past the original lease, well within the renewed one
	d := f.expect(f.fresh(req), idempotency.OutcomeInProgress)
	if d.RetryAfter <= shortLease || d.RetryAfter > renewed+timeSlack {
		f.t.Errorf("RetryAfter after Renew = %v, want in (%v, %v]", d.RetryAfter, shortLease, renewed)
	}
	// Renewing again keeps working, and the owner completes normally.
	if err := f.store.Renew(f.ctx, lease, renewed); err != nil {
		f.t.Fatalf("second Renew: %v", err)
	}
	f.complete(lease, jsonResponse(`{}`), replayTTL)
}

func testNonOwnerChangesNothing(f *fixture) {
	req := f.request(f.scope("tool", "key"), fingerprintA, f.step("intruder", 1))
	lease := f.claimed(req)
	before := f.get(req.Scope)

	intruder := lease
	intruder.Owner = f.id("intruder")
	f.expectLeaseLost(intruder, "another owner")
	if after := f.get(req.Scope); !sameRecord(after, before) {
		f.t.Errorf("a non-owner changed the record:\n got %+v\nwant %+v", after, before)
	}
	f.expect(f.fresh(req), idempotency.OutcomeInProgress)
	f.complete(lease, jsonResponse(`{}`), replayTTL)
}

func testFinishedLeaseIsLost(f *fixture) {
	// After Complete: the record stays COMPLETED with the first response.
	req := f.request(f.scope("tool", "completed"), fingerprintA, f.step("finished", 1))
	lease := f.claimed(req)
	resp := jsonResponse(`{"first":true}`)
	f.complete(lease, resp, replayTTL)
	f.expectLeaseLost(lease, "owner after Complete")
	d := f.expect(f.fresh(req), idempotency.OutcomeReplay)
	if !sameResponse(d.Response, resp) {
		f.t.Errorf("replay after late owner calls = %+v, want %+v", d.Response, resp)
	}

	f.expectEndedLeaseRecreatesNothing("tool", "finished")
}

// expectEndedLeaseRecreatesNothing claims a record of tool in session,
// then releases it (and, again, deletes it): the lease is lost to its
// owner (expectLeaseLost) and the record stays absent.
func (f *fixture) expectEndedLeaseRecreatesNothing(tool, session string) {
	f.t.Helper()
	for _, end := range []string{"Release", "Delete"} {
		req := f.request(f.scope(tool, end), fingerprintA, f.step(session, 2))
		lease := f.claimed(req)
		if end == "Release" {
			f.release(lease)
		} else {
			f.delete(req.Scope)
		}
		f.expectLeaseLost(lease, "owner after "+end)
		f.expectNotFound(req.Scope)
	}
}

func testCompleteTTL(f *fixture) {
	const ttl = 400 * time.Millisecond
	req := f.request(f.scope("tool", "key"), fingerprintA, f.step("ttl", 1))
	lease := f.claimed(req)
	completedAt := time.Now()
	f.complete(lease, jsonResponse(`{}`), ttl)
	if rec := f.get(req.Scope); !within(rec.ExpiresAt, completedAt.Add(ttl), clockSlack) {
		f.t.Errorf("ExpiresAt = %v, want about %v", rec.ExpiresAt, completedAt.Add(ttl))
	}
	f.expect(f.fresh(req), idempotency.OutcomeReplay)
	time.Sleep(2 * ttl)
	f.expectNotFound(req.Scope)
	d := f.expect(f.fresh(req), idempotency.OutcomeClaimed)
	if d.TakenOver || d.ExecutionID == req.ExecutionID {
		f.t.Errorf("claim after expiry = %+v, want a first claim with a new execution id", d)
	}
}

func sameRecord(a, b idempotency.Record) bool {
	if (a.Response == nil) != (b.Response == nil) {
		return false
	}
	if a.Response != nil && !sameResponse(a.Response, *b.Response) {
		return false
	}
	return a.Scope == b.Scope && a.State == b.State && a.Fingerprint == b.Fingerprint &&
		a.ExecutionID == b.ExecutionID && a.FencingToken == b.FencingToken &&
		a.CreatedAt.Equal(b.CreatedAt) && a.ExpiresAt.Equal(b.ExpiresAt) && a.LeaseExpiresAt.Equal(b.LeaseExpiresAt)
}
