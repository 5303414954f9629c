package storetest

import (
	"errors"
	"fmt"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// NewestFirst is implemented by stores whose Admin.List promises newest
// first order (by creation time); the suite then checks the order.
type NewestFirst interface {
	// ListsNewestFirst reports whether List orders records newest first.
	ListsNewestFirst() bool
}

func adminCases() []testCase {
	cases := []testCase{
		{"AdminListByState", testAdminListByState},
		{"AdminListFilters", testAdminListFilters},
		{"AdminListPagination", testAdminListPagination},
		{"AdminListLimit", testAdminListLimit},
		{"AdminListSkipsExpired", testAdminListSkipsExpired},
		{"AdminFindExecution", testAdminFindExecution},
		{"AdminResolveUnknown", testAdminResolveUnknown},
		{"AdminResolveExpiredInProgress", testAdminResolveExpiredInProgress},
		{"AdminResolveRefused", testAdminResolveRefused},
		{"AdminRecordStep", testAdminRecordStep},
	}
	// Every store of this module is an Admin: the admin API and the
	// operators' way out of UNKNOWN depend on it.
	return requiring[idempotency.Admin](cases, "idempotency.Admin")
}

func (f *fixture) admin() idempotency.Admin {
	return f.store.(idempotency.Admin)
}

// listAll pages through filter with the given page size and returns every
// record, failing if a page is larger than the limit, a record carries a
// response, or the listing does not end within a sane number of pages.
func (f *fixture) listAll(filter idempotency.ListFilter) []idempotency.Record {
	f.t.Helper()
	var all []idempotency.Record
	for pages := 0; ; pages++ {
		if pages > 1000 {
			f.t.Fatalf("List(%+v) did not end after %d pages", filter, pages)
		}
		page, err := f.admin().List(f.ctx, filter)
		if err != nil {
			f.t.Fatalf("List(%+v): %v", filter, err)
		}
		if len(page.Records) > filter.Limit {
			f.t.Fatalf("List(%+v) returned %d records, more than the limit", filter, len(page.Records))
		}
		for _, r := range page.Records {
			if r.Response != nil {
				f.t.Errorf("List returned %s with a response", r.Scope)
			}
		}
		all = append(all, page.Records...)
		if page.Cursor == "" {
			return all
		}
		filter.Cursor = page.Cursor
	}
}

// expectListed fails unless listing filter yields exactly want (as a set).
func (f *fixture) expectListed(filter idempotency.ListFilter, want ...idempotency.Scope) {
	f.t.Helper()
	if filter.Limit == 0 {
		filter.Limit = 100
	}
	got := f.listAll(filter)
	seen := map[idempotency.Scope]int{}
	for _, r := range got {
		seen[r.Scope]++
	}
	ok := len(got) == len(want)
	for _, s := range want {
		if seen[s] != 1 {
			ok = false
		}
	}
	if !ok {
		names := make([]string, 0, len(got))
		for _, r := range got {
			names = append(names, fmt.Sprintf("%s(%s)", r.Scope, r.State))
		}
		f.t.Fatalf("List(%+v) = %v, want exactly %v", filter, names, want)
	}
}

func testAdminListByState(f *fixture) {
	inProgress := f.request(f.scope("tool", "running"), fingerprintA, nil)
	f.claimed(inProgress)
	completed := f.request(f.scope("tool", "done"), fingerprintA, nil)
	f.complete(f.claimed(completed), jsonResponse(`{"ok":true}`), replayTTL)
	unknown := f.request(f.scope("tool", "lost"), fingerprintA, nil)
	f.expireIntoUnknown(unknown)

	f.expectListed(idempotency.ListFilter{State: idempotency.StateInProgress}, inProgress.Scope)
	f.expectListed(idempotency.ListFilter{State: idempotency.StateCompleted}, completed.Scope)
	f.expectListed(idempotency.ListFilter{State: idempotency.StateUnknown}, unknown.Scope)
	f.expectListed(idempotency.ListFilter{}, inProgress.Scope, completed.Scope, unknown.Scope)

	// Every page: one may hold none and still have a cursor.
	for _, r := range f.listAll(idempotency.ListFilter{State: idempotency.StateUnknown, Limit: 10}) {
		if r.State != idempotency.StateUnknown || r.ExecutionID != unknown.ExecutionID || r.Fingerprint != fingerprintA {
			f.t.Errorf("UNKNOWN listing shows %+v, want the lost execution %q", r, unknown.ExecutionID)
		}
	}
}

func testAdminListFilters(f *fixture) {
	a1 := idempotency.Scope{Tenant: "tenant-a", Tool: "pay", Key: f.id("k")}
	a2 := idempotency.Scope{Tenant: "tenant-a", Tool: "mail", Key: f.id("k")}
	b1 := idempotency.Scope{Tenant: "tenant-b", Tool: "pay", Key: f.id("k")}
	b2 := idempotency.Scope{Tenant: "tenant-b", Tool: "mail", Key: f.id("k")}
	// Both tenants use the same session id: sessions are scoped by tenant.
	f.claimed(f.request(a1, fingerprintA, f.step("s1", 1)))
	f.claimed(f.request(a2, fingerprintA, f.step("s2", 1)))
	f.claimed(f.request(b1, fingerprintA, f.step("s1", 1)))
	f.complete(f.claimed(f.request(b2, fingerprintA, nil)), jsonResponse(`{}`), replayTTL)

	f.expectListed(idempotency.ListFilter{Tenant: "tenant-a"}, a1, a2)
	f.expectListed(idempotency.ListFilter{Tenant: "tenant-b"}, b1, b2)
	f.expectListed(idempotency.ListFilter{Tenant: "tenant-c"})
	f.expectListed(idempotency.ListFilter{Tool: "pay"}, a1, b1)
	f.expectListed(idempotency.ListFilter{Tenant: "tenant-b", Tool: "mail"}, b2)
	f.expectListed(idempotency.ListFilter{Tenant: "tenant-b", Tool: "mail", State: idempotency.StateInProgress})
	f.expectListed(idempotency.ListFilter{Tenant: "tenant-a", SessionID: f.step("s1", 0).SessionID}, a1)
	f.expectListed(idempotency.ListFilter{Tenant: "tenant-b", SessionID: f.step("s1", 0).SessionID}, b1)
	f.expectListed(idempotency.ListFilter{Tenant: "tenant-b", SessionID: f.step("s2", 0).SessionID})
}

func testAdminListPagination(f *fixture) {
	const n = 7
	var want []idempotency.Scope
	for i := range n {
		req := f.request(f.scope("tool", fmt.Sprintf("page-%d", i)), fingerprintA, nil)
		lease := f.claimed(req)
		if i%2 == 0 {
			f.complete(lease, jsonResponse(`{}`), replayTTL)
		}
		want = append(want, req.Scope)
		// Distinct creation times, so a newest-first order is checkable.
		time.Sleep(2 * time.Millisecond)
	}
	for _, limit := range []int{1, 2, 3, n, n + 1} {
		got := f.listAll(idempotency.ListFilter{Limit: limit})
		seen := map[idempotency.Scope]int{}
		for _, r := range got {
			seen[r.Scope]++
		}
		for _, s := range want {
			if seen[s] != 1 {
				f.t.Errorf("limit %d: %s listed %d times, want once", limit, s, seen[s])
			}
		}
		if len(got) != n {
			f.t.Errorf("limit %d: %d records listed, want %d", limit, len(got), n)
		}
		if nf, ok := f.store.(NewestFirst); ok && nf.ListsNewestFirst() && len(got) == n {
			for i := range got {
				if got[i].Scope != want[n-1-i] {
					f.t.Errorf("limit %d: position %d is %s, want %s (newest first)", limit, i, got[i].Scope, want[n-1-i])
				}
			}
		}
	}
}

func testAdminListLimit(f *fixture) {
	f.claimed(f.request(f.scope("tool", "one"), fingerprintA, nil))
	for _, limit := range []int{0, -1, idempotency.MaxListLimit + 1} {
		if page, err := f.admin().List(f.ctx, idempotency.ListFilter{Limit: limit}); err == nil {
			f.t.Errorf("List with limit %d = %+v, want an error", limit, page)
		}
	}
	for _, cursor := range []string{"not a cursor", "!!"} {
		if page, err := f.admin().List(f.ctx, idempotency.ListFilter{Limit: 1, Cursor: cursor}); !errors.Is(err, idempotency.ErrInvalidCursor) {
			f.t.Errorf("List with cursor %q = %+v, %v; want ErrInvalidCursor", cursor, page, err)
		}
	}
	// The largest limit is accepted. A store that scans may still end a
	// page early with a cursor (Page's contract), so follow it to the end.
	f.expectListed(idempotency.ListFilter{Limit: idempotency.MaxListLimit}, f.scope("tool", "one"))
}

func testAdminListSkipsExpired(f *fixture) {
	gone := f.request(f.scope("tool", "gone"), fingerprintA, nil)
	goneLease := f.claimed(gone)
	f.complete(goneLease, jsonResponse(`{}`), shortLease)
	kept := f.request(f.scope("tool", "kept"), fingerprintA, nil)
	f.complete(f.claimed(kept), jsonResponse(`{}`), replayTTL)
	time.Sleep(expireWait)

	f.expectListed(idempotency.ListFilter{}, kept.Scope)
	f.expectListed(idempotency.ListFilter{State: idempotency.StateCompleted}, kept.Scope)
	if rec, err := f.admin().FindExecution(f.ctx, gone.ExecutionID); !errors.Is(err, idempotency.ErrNotFound) {
		f.t.Errorf("FindExecution of an expired record = %+v, %v; want ErrNotFound", rec, err)
	}
}

func testAdminFindExecution(f *fixture) {
	resp := idempotency.StoredResponse{Status: 201, ContentType: "application/octet-stream", Body: []byte{0, 0xff, 'x'}}
	other := idempotency.Scope{Tenant: "tenant-b", Tool: "pay", Key: f.id("k")}
	done := f.request(other, fingerprintA, nil)
	f.complete(f.claimed(done), resp, replayTTL)
	running := f.request(f.scope("tool", "running"), fingerprintB, nil)
	f.claimed(running)

	rec, err := f.admin().FindExecution(f.ctx, done.ExecutionID)
	if err != nil {
		f.t.Fatalf("FindExecution(completed): %v", err)
	}
	if rec.Scope != other || rec.State != idempotency.StateCompleted || rec.ExecutionID != done.ExecutionID || !sameResponse(rec.Response, resp) {
		f.t.Errorf("FindExecution(completed) = %+v, want %s COMPLETED with %+v", rec, other, resp)
	}
	rec, err = f.admin().FindExecution(f.ctx, running.ExecutionID)
	if err != nil {
		f.t.Fatalf("FindExecution(in progress): %v", err)
	}
	if rec.Scope != running.Scope || rec.State != idempotency.StateInProgress || rec.Fingerprint != fingerprintB || rec.Response != nil {
		f.t.Errorf("FindExecution(in progress) = %+v, want %s IN_PROGRESS without a response", rec, running.Scope)
	}
	if rec, err := f.admin().FindExecution(f.ctx, f.id("exec")); !errors.Is(err, idempotency.ErrNotFound) {
		f.t.Errorf("FindExecution(unknown id) = %+v, %v; want ErrNotFound", rec, err)
	}
	f.delete(other)
	if rec, err := f.admin().FindExecution(f.ctx, done.ExecutionID); !errors.Is(err, idempotency.ErrNotFound) {
		f.t.Errorf("FindExecution after Delete = %+v, %v; want ErrNotFound", rec, err)
	}
}

func (f *fixture) resolve(scope idempotency.Scope, resp idempotency.StoredResponse, ttl time.Duration) idempotency.Record {
	f.t.Helper()
	rec, err := f.admin().Resolve(f.ctx, scope, resp, ttl)
	if err != nil {
		f.t.Fatalf("Resolve(%s): %v", scope, err)
	}
	return rec
}

func testAdminResolveUnknown(f *fixture) {
	step := f.step("resolve", 4)
	req := f.request(f.scope("pay", "key"), fingerprintA, step)
	lostLease := f.expireIntoUnknown(req)

	resp := jsonResponse(`{"charged":true,"by":"operator"}`)
	before := time.Now()
	rec := f.resolve(req.Scope, resp, replayTTL)
	if rec.Scope != req.Scope || rec.State != idempotency.StateCompleted || rec.ExecutionID != req.ExecutionID ||
		rec.Fingerprint != fingerprintA || !sameResponse(rec.Response, resp) {
		f.t.Errorf("Resolve returned %+v, want COMPLETED %s of %q with %+v", rec, req.Scope, req.ExecutionID, resp)
	}
	if !within(rec.ExpiresAt, before.Add(replayTTL), clockSlack) {
		f.t.Errorf("resolved record expires at %v, want about %v", rec.ExpiresAt, before.Add(replayTTL))
	}
	got := f.get(req.Scope)
	if got.State != idempotency.StateCompleted || !sameResponse(got.Response, resp) || got.ExecutionID != req.ExecutionID {
		f.t.Errorf("Get after Resolve = %+v", got)
	}

	// The agent's retry replays what the operator stored.
	d := f.expect(f.fresh(req), idempotency.OutcomeReplay)
	if d.ExecutionID != req.ExecutionID || !sameResponse(d.Response, resp) {
		f.t.Errorf("replay after Resolve = %+v, want execution %q and %+v", d, req.ExecutionID, resp)
	}
	otherArgs := f.fresh(req)
	otherArgs.Fingerprint = fingerprintB
	f.expect(otherArgs, idempotency.OutcomeKeyReused)
	// The record keeps its step.
	f.expectConflict(f.request(f.scope("pay", "other"), fingerprintB, step), "pay", req.ExecutionID)
	// The dead owner still cannot touch it.
	f.expectLeaseLost(lostLease, "dead owner after Resolve")
	// A second Resolve is refused: the record is COMPLETED now.
	if _, err := f.admin().Resolve(f.ctx, req.Scope, jsonResponse(`{}`), replayTTL); !errors.Is(err, idempotency.ErrNotResolvable) {
		f.t.Errorf("second Resolve = %v, want ErrNotResolvable", err)
	}
}

func testAdminResolveExpiredInProgress(f *fixture) {
	req := f.request(f.scope("tool", "stale"), fingerprintA, f.step("stale", 1))
	req.LockTTL = shortLease
	lease := f.claimed(req)
	time.Sleep(expireWait)

	resp := idempotency.StoredResponse{Status: 409, ContentType: "text/plain", Body: []byte("already shipped")}
	rec := f.resolve(req.Scope, resp, replayTTL)
	if rec.State != idempotency.StateCompleted || rec.ExecutionID != req.ExecutionID || !sameResponse(rec.Response, resp) {
		f.t.Errorf("Resolve of an expired lease = %+v", rec)
	}
	f.expectLeaseLost(lease, "owner after Resolve")
	d := f.expect(f.fresh(req), idempotency.OutcomeReplay)
	if d.ExecutionID != req.ExecutionID || !sameResponse(d.Response, resp) {
		f.t.Errorf("replay after Resolve = %+v, want %+v", d, resp)
	}
}

func testAdminResolveRefused(f *fixture) {
	doneResp := jsonResponse(`{"original":true}`)
	done := f.request(f.scope("tool", "done"), fingerprintA, nil)
	f.complete(f.claimed(done), doneResp, replayTTL)
	if _, err := f.admin().Resolve(f.ctx, done.Scope, jsonResponse(`{}`), replayTTL); !errors.Is(err, idempotency.ErrNotResolvable) {
		f.t.Errorf("Resolve(COMPLETED) = %v, want ErrNotResolvable", err)
	}
	if rec := f.get(done.Scope); !sameResponse(rec.Response, doneResp) {
		f.t.Errorf("a refused Resolve changed the response to %+v", rec.Response)
	}

	running := f.request(f.scope("tool", "running"), fingerprintA, nil)
	lease := f.claimed(running)
	if _, err := f.admin().Resolve(f.ctx, running.Scope, jsonResponse(`{}`), replayTTL); !errors.Is(err, idempotency.ErrNotResolvable) {
		f.t.Errorf("Resolve(live IN_PROGRESS) = %v, want ErrNotResolvable", err)
	}
	// The owner still owns it.
	resp := jsonResponse(`{"by":"owner"}`)
	f.complete(lease, resp, replayTTL)
	if rec := f.get(running.Scope); !sameResponse(rec.Response, resp) {
		f.t.Errorf("after a refused Resolve the owner's completion stored %+v", rec.Response)
	}

	if _, err := f.admin().Resolve(f.ctx, f.scope("tool", "missing"), jsonResponse(`{}`), replayTTL); !errors.Is(err, idempotency.ErrNotFound) {
		f.t.Errorf("Resolve(missing) = %v, want ErrNotFound", err)
	}
}

func testAdminRecordStep(f *fixture) {
	step := f.step("steps", 9)
	withStep := f.request(f.scope("tool", "stepped"), fingerprintA, step)
	f.claimed(withStep)
	noStep := f.request(f.scope("tool", "plain"), fingerprintA, nil)
	f.claimed(noStep)

	check := func(what string, rec idempotency.Record) {
		f.t.Helper()
		switch rec.Scope {
		case withStep.Scope:
			// The interface lets a store that cannot tell leave Step nil.
			if rec.Step != nil && *rec.Step != *step {
				f.t.Errorf("%s: step = %+v, want %+v", what, rec.Step, step)
			}
		case noStep.Scope:
			if rec.Step != nil {
				f.t.Errorf("%s: a record claimed without a step reports %+v", what, rec.Step)
			}
		}
	}
	for _, r := range f.listAll(idempotency.ListFilter{Limit: 10}) {
		check("List", r)
	}
	for _, req := range []idempotency.ClaimRequest{withStep, noStep} {
		rec, err := f.admin().FindExecution(f.ctx, req.ExecutionID)
		if err != nil {
			f.t.Fatalf("FindExecution: %v", err)
		}
		check("FindExecution", rec)
		check("Get", f.get(req.Scope))
	}
}
