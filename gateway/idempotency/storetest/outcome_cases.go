package storetest

import (
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// outcomeCases pin the owner's two ways of recording an outcome, Complete
// and MarkUnknown: who may still record (the owner, even past its lease,
// until another claim takes the record over) and what an UNKNOWN record
// marked by its owner answers.
func outcomeCases() []testCase {
	return []testCase{
		{"MarkUnknownByOwner", testMarkUnknownByOwner},
		{"MarkUnknownExpiresAfterTTL", testMarkUnknownExpires},
		{"MarkUnknownNotOwner", testMarkUnknownNotOwner},
		{"OwnerCompletesAfterLeaseExpiry", testOwnerCompletesAfterLeaseExpiry},
		{"OwnerMarksUnknownAfterLeaseExpiry", testOwnerMarksUnknownAfterLeaseExpiry},
		{"ExpiredOwnerLosesToTakeover", testExpiredOwnerLosesToTakeover},
	}
}

func testMarkUnknownByOwner(f *fixture) {
	step := f.step("mark-unknown", 3)
	req := f.request(f.scope("pay", "key"), fingerprintA, step)
	lease := f.claimed(req)
	before := f.get(req.Scope)
	marked := time.Now()
	f.markUnknown(lease, replayTTL)

	rec := f.get(req.Scope)
	if rec.State != idempotency.StateUnknown || rec.ExecutionID != req.ExecutionID || rec.Fingerprint != fingerprintA ||
		rec.FencingToken != lease.FencingToken || rec.Response != nil || !rec.CreatedAt.Equal(before.CreatedAt) {
		f.t.Errorf("record after MarkUnknown = %+v, want UNKNOWN of %q, token %d, created %v, no response",
			rec, req.ExecutionID, lease.FencingToken, before.CreatedAt)
	}
	if !within(rec.ExpiresAt, marked.Add(replayTTL), clockSlack) {
		f.t.Errorf("UNKNOWN ExpiresAt = %v, want about %v", rec.ExpiresAt, marked.Add(replayTTL))
	}
	// Every retry, whatever its policy, answers unknown with the execution
	// that may have acted; other arguments are still a reused key.
	for _, policy := range []idempotency.LeaseExpiry{idempotency.LeaseExpiryUnknown, idempotency.LeaseExpiryRerun} {
		retry := f.fresh(req)
		retry.LeaseExpiry = policy
		if d := f.expect(retry, idempotency.OutcomeUnknown); d.ExecutionID != req.ExecutionID {
			f.t.Errorf("retry of a marked record: execution id %q, want %q", d.ExecutionID, req.ExecutionID)
		}
	}
	other := f.fresh(req)
	other.Fingerprint = fingerprintB
	f.expect(other, idempotency.OutcomeKeyReused)
	// The record still holds its step, and the owner can no longer change
	// it: the verdict is an operator's now.
	f.expectConflict(f.request(f.scope("pay", "other"), fingerprintB, step), "pay", req.ExecutionID)
	f.expectLeaseLost(lease, "owner after MarkUnknown")
	if after := f.get(req.Scope); after.State != idempotency.StateUnknown {
		f.t.Errorf("after the owner's later calls the record is %s, want UNKNOWN", after.State)
	}
	// The way out: an operator deletes it and the next call runs.
	f.delete(req.Scope)
	f.claimed(f.fresh(req))
}

func testMarkUnknownExpires(f *fixture) {
	const ttl = 600 * time.Millisecond
	step := f.step("mark-unknown-ttl", 1)
	req := f.request(f.scope("pay", "key"), fingerprintA, step)
	lease := f.claimed(req)
	f.markUnknown(lease, ttl)
	f.expect(f.fresh(req), idempotency.OutcomeUnknown)
	time.Sleep(ttl + expireWait)
	f.expectNotFound(req.Scope)
	// The step went with the record.
	f.claimed(f.request(f.scope("pay", "other"), fingerprintB, step))
}

func testMarkUnknownNotOwner(f *fixture) {
	req := f.request(f.scope("pay", "key"), fingerprintA, f.step("mark-unknown-intruder", 1))
	lease := f.claimed(req)
	before := f.get(req.Scope)
	intruder := lease
	intruder.Owner = f.id("intruder")
	stale := lease
	stale.FencingToken--
	for what, l := range map[string]idempotency.Lease{"another owner": intruder, "an older fencing token": stale} {
		f.expectLeaseLost(l, what)
	}
	if after := f.get(req.Scope); !sameRecord(after, before) {
		f.t.Errorf("a non-owner changed the record:\n got %+v\nwant %+v", after, before)
	}
	// After Complete the record stays COMPLETED: a late MarkUnknown must
	// not hide the response.
	resp := jsonResponse(`{"done":true}`)
	f.complete(lease, resp, replayTTL)
	f.expectLeaseLost(lease, "owner after Complete")
	if d := f.expect(f.fresh(req), idempotency.OutcomeReplay); !sameResponse(d.Response, resp) {
		f.t.Errorf("replay after a late MarkUnknown = %+v, want %+v", d.Response, resp)
	}
	f.expectEndedLeaseRecreatesNothing("pay", "mark-unknown-gone")
}

// An outcome the gateway kept through a store outage longer than the lease
// is recorded when the store answers again, as long as no claim came in
// between.
func testOwnerCompletesAfterLeaseExpiry(f *fixture) {
	for _, policy := range []idempotency.LeaseExpiry{idempotency.LeaseExpiryRerun, idempotency.LeaseExpiryUnknown} {
		req := f.request(f.scope("tool", "late-"+string(policy)), fingerprintA, f.step("late-complete-"+string(policy), 1))
		req.LockTTL = shortLease
		req.LeaseExpiry = policy
		lease := f.claimed(req)
		time.Sleep(expireWait)
		resp := jsonResponse(`{"late":true}`)
		f.complete(lease, resp, replayTTL)
		d := f.expect(f.fresh(req), idempotency.OutcomeReplay)
		if d.ExecutionID != req.ExecutionID || !sameResponse(d.Response, resp) {
			f.t.Errorf("%s: replay of a late completion = %+v, want execution %q and %+v", policy, d, req.ExecutionID, resp)
		}
	}
}

func testOwnerMarksUnknownAfterLeaseExpiry(f *fixture) {
	req := f.request(f.scope("pay", "late"), fingerprintA, f.step("late-unknown", 1))
	req.LockTTL = shortLease
	req.LeaseExpiry = idempotency.LeaseExpiryUnknown
	lease := f.claimed(req)
	time.Sleep(expireWait)
	f.markUnknown(lease, replayTTL)
	if d := f.expect(f.fresh(req), idempotency.OutcomeUnknown); d.ExecutionID != req.ExecutionID {
		f.t.Errorf("unknown execution id = %q, want %q", d.ExecutionID, req.ExecutionID)
	}
	if rec := f.get(req.Scope); rec.State != idempotency.StateUnknown || rec.FencingToken != lease.FencingToken {
		f.t.Errorf("record = %+v, want UNKNOWN with token %d", rec, lease.FencingToken)
	}
}

// Once another claim took an expired record over, the old owner records
// nothing: neither its response nor UNKNOWN over the new owner's run.
func testExpiredOwnerLosesToTakeover(f *fixture) {
	req := f.request(f.scope("tool", "key"), fingerprintA, f.step("late-takeover", 1))
	req.LockTTL = shortLease
	oldLease := f.claimed(req)
	time.Sleep(expireWait)
	d := f.expect(f.fresh(req), idempotency.OutcomeClaimed)
	if !d.TakenOver {
		f.t.Fatalf("claim after lease expiry: TakenOver = false")
	}
	f.expectLeaseLost(oldLease, "expired owner after takeover")
	if rec := f.get(req.Scope); rec.State != idempotency.StateInProgress || rec.FencingToken != d.Lease.FencingToken {
		f.t.Errorf("record = %+v, want the new owner's IN_PROGRESS with token %d", rec, d.Lease.FencingToken)
	}
	f.markUnknown(d.Lease, replayTTL)
	f.expect(f.fresh(req), idempotency.OutcomeUnknown)
}
