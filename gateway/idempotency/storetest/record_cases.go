package storetest

import (
	"errors"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

func recordCases() []testCase {
	return []testCase{
		{"GetReturnsAllFields", testGetReturnsAllFields},
		{"DeleteAndNotFound", testDeleteAndNotFound},
		{"TenantIsolation", testTenantIsolation},
	}
}

func testGetReturnsAllFields(f *fixture) {
	for _, step := range []*idempotency.Step{nil, f.step("get", 1)} {
		req := f.request(f.scope("tool", f.id("key")), fingerprintA, step)
		before := time.Now()
		lease := f.claimed(req)
		after := time.Now()

		rec := f.get(req.Scope)
		if rec.Scope != req.Scope || rec.State != idempotency.StateInProgress || rec.Fingerprint != fingerprintA ||
			rec.ExecutionID != req.ExecutionID || rec.FencingToken != lease.FencingToken || rec.Response != nil {
			f.t.Errorf("step %v: IN_PROGRESS record = %+v, want scope %+v execution %q token %d", step, rec, req.Scope, req.ExecutionID, lease.FencingToken)
		}
		if rec.CreatedAt.Before(before.Add(-clockSlack)) || rec.CreatedAt.After(after.Add(clockSlack)) {
			f.t.Errorf("step %v: CreatedAt = %v, want between %v and %v", step, rec.CreatedAt, before, after)
		}
		if !within(rec.LeaseExpiresAt, rec.CreatedAt.Add(req.LockTTL), timeSlack) {
			f.t.Errorf("step %v: LeaseExpiresAt = %v, want CreatedAt + lock ttl = %v", step, rec.LeaseExpiresAt, rec.CreatedAt.Add(req.LockTTL))
		}
		if rec.ExpiresAt.Before(rec.LeaseExpiresAt) {
			f.t.Errorf("step %v: ExpiresAt %v before LeaseExpiresAt %v", step, rec.ExpiresAt, rec.LeaseExpiresAt)
		}

		resp := idempotency.StoredResponse{Status: 202, ContentType: "application/json", Body: []byte(`{"queued":true}`)}
		const ttl = time.Hour
		completedAt := time.Now()
		f.complete(lease, resp, ttl)
		done := f.get(req.Scope)
		if done.Scope != req.Scope || done.State != idempotency.StateCompleted || done.Fingerprint != fingerprintA ||
			done.ExecutionID != req.ExecutionID || done.FencingToken != lease.FencingToken || !sameResponse(done.Response, resp) {
			f.t.Errorf("step %v: COMPLETED record = %+v (response %+v), want response %+v", step, done, done.Response, resp)
		}
		if !done.CreatedAt.Equal(rec.CreatedAt) {
			f.t.Errorf("step %v: Complete moved CreatedAt from %v to %v", step, rec.CreatedAt, done.CreatedAt)
		}
		if !within(done.ExpiresAt, completedAt.Add(ttl), clockSlack) {
			f.t.Errorf("step %v: COMPLETED ExpiresAt = %v, want about %v", step, done.ExpiresAt, completedAt.Add(ttl))
		}
		if !done.LeaseExpiresAt.IsZero() {
			f.t.Errorf("step %v: COMPLETED record has LeaseExpiresAt %v", step, done.LeaseExpiresAt)
		}
	}
}

func testDeleteAndNotFound(f *fixture) {
	missing := f.scope("tool", "missing")
	f.expectNotFound(missing)
	if err := f.store.Delete(f.ctx, missing); !errors.Is(err, idempotency.ErrNotFound) {
		f.t.Errorf("Delete of a missing record = %v, want ErrNotFound", err)
	}

	for _, step := range []*idempotency.Step{nil, f.step("delete", 9)} {
		inProgress := f.request(f.scope("tool", f.id("in-progress")), fingerprintA, step)
		f.claimed(inProgress)
		completed := f.request(f.scope("tool", f.id("completed")), fingerprintA, nil)
		f.complete(f.claimed(completed), jsonResponse(`{}`), replayTTL)

		for _, req := range []idempotency.ClaimRequest{inProgress, completed} {
			f.delete(req.Scope)
			f.expectNotFound(req.Scope)
			if err := f.store.Delete(f.ctx, req.Scope); !errors.Is(err, idempotency.ErrNotFound) {
				f.t.Errorf("second Delete = %v, want ErrNotFound", err)
			}
			// The next call runs the tool: a first claim, not a replay.
			next := f.fresh(req)
			f.claimed(next)
			f.delete(req.Scope)
		}
	}
}

func testTenantIsolation(f *fixture) {
	step := f.step("tenants", 1)
	scopeA := idempotency.Scope{Tenant: "tenant-a", Tool: "tool", Key: "shared-key"}
	scopeB := idempotency.Scope{Tenant: "tenant-b", Tool: "tool", Key: "shared-key"}
	reqA := f.request(scopeA, fingerprintA, step)
	reqB := f.request(scopeB, fingerprintB, step) // same session and step, other arguments
	leaseA := f.claimed(reqA)
	leaseB := f.claimed(reqB) // neither key_reused, in_progress nor step_conflict

	respA := jsonResponse(`{"tenant":"a"}`)
	f.complete(leaseA, respA, replayTTL)
	f.expect(f.fresh(reqB), idempotency.OutcomeInProgress)
	// Tenant B, sending tenant A's arguments, still sees only its own record.
	sameArgs := f.fresh(reqB)
	sameArgs.Fingerprint = fingerprintA
	f.expect(sameArgs, idempotency.OutcomeKeyReused)

	if rec := f.get(scopeA); rec.State != idempotency.StateCompleted || rec.ExecutionID != reqA.ExecutionID {
		f.t.Errorf("tenant A record = %+v", rec)
	}
	if rec := f.get(scopeB); rec.State != idempotency.StateInProgress || rec.ExecutionID != reqB.ExecutionID || rec.Scope != scopeB {
		f.t.Errorf("tenant B record = %+v", rec)
	}
	// Another tenant's owner token does not work here either.
	crossed := leaseB
	crossed.Scope = scopeA
	f.expectLeaseLost(crossed, "tenant B's owner on tenant A's scope")

	f.delete(scopeA)
	if rec := f.get(scopeB); rec.ExecutionID != reqB.ExecutionID {
		f.t.Errorf("deleting tenant A's record touched tenant B's: %+v", rec)
	}
	f.expectNotFound(idempotency.Scope{Tenant: "tenant-c", Tool: "tool", Key: "shared-key"})
	f.release(leaseB)
	f.expectNotFound(scopeB)
}
