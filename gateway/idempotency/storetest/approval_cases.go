package storetest

import (
	"errors"
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// Approval windows: a "long" one never runs out during a case, a short
// one is waited out with expireWait.
const (
	longApproval  = time.Hour
	shortApproval = shortLease
)

func approvalCases() []testCase {
	cases := []testCase{
		{"ApprovalPending", testApprovalPending},
		{"ApprovalPendingStepConflict", testApprovalPendingStepConflict},
		{"ApprovalKeyReused", testApprovalKeyReused},
		{"ApprovalApprovedIsConsumed", testApprovalApprovedIsConsumed},
		{"ApprovalApprovedConsumedByAllow", testApprovalApprovedConsumedByAllow},
		{"ApprovalAllowClaimsPending", testApprovalAllowClaimsPending},
		{"ApprovalDenied", testApprovalDenied},
		{"ApprovalPendingExpires", testApprovalPendingExpires},
		{"ApprovalApprovedExpires", testApprovalApprovedExpires},
		{"ApprovalDecideTwice", testApprovalDecideTwice},
		{"ApprovalUnknownID", testApprovalUnknownID},
		{"ApprovalNotResolvable", testApprovalNotResolvable},
		{"ApprovalRecordDeleted", testApprovalRecordDeleted},
		{"ApprovalList", testApprovalList},
		{"ApprovalListPagination", testApprovalListPagination},
		{"ApprovalConcurrentClaimsOfApproved", testApprovalConcurrentClaimsOfApproved},
		{"ApprovalApproveRacesClaim", testApprovalApproveRacesClaim},
		{"ApprovalConcurrentDecisions", testApprovalConcurrentDecisions},
	}
	cases = append(cases, approvalPrincipalCases()...)
	return requiring[idempotency.Approvals](cases, "idempotency.Approvals")
}

func (f *fixture) approvals() idempotency.Approvals {
	return f.store.(idempotency.Approvals)
}

// approvalRequest is f.request whose rules say approve, with a fresh
// approval id and long windows.
func (f *fixture) approvalRequest(scope idempotency.Scope, fingerprint string, step *idempotency.Step) idempotency.ClaimRequest {
	req := f.request(scope, fingerprint, step)
	req.CanonicalArguments = []byte(`{"amount":2000}`)
	req.Approval = &idempotency.ApprovalClaim{
		ID: ulid.Make().String(), Rule: 1, Reason: "refunds above 1 000 need finance",
		Approver: idempotency.ApproverOperator, Timeout: longApproval, UseWithin: longApproval,
	}
	return req
}

// again is req as the caller's next request sends it: a new owner,
// execution id and approval id.
func (f *fixture) again(req idempotency.ClaimRequest) idempotency.ClaimRequest {
	req = f.fresh(req)
	if req.Approval != nil {
		a := *req.Approval
		a.ID = ulid.Make().String()
		req.Approval = &a
	}
	return req
}

// pending claims req, requires a new pending approval with req's id, and
// returns it.
func (f *fixture) pending(req idempotency.ClaimRequest) idempotency.Approval {
	f.t.Helper()
	before := time.Now()
	d := f.expect(req, idempotency.OutcomeAwaitingApproval)
	a := d.Approval
	if a == nil || a.ID != req.Approval.ID || a.UseWithin != req.Approval.UseWithin || a.Approver != req.Approval.Approver.OrDefault() {
		f.t.Fatalf("pending approval = %+v, want id %q", a, req.Approval.ID)
	}
	if !within(a.ExpiresAt, before.Add(req.Approval.Timeout), clockSlack) || !within(a.RequestedAt, before, clockSlack) {
		f.t.Errorf("pending approval requested %v expires %v, want about %v and %v", a.RequestedAt, a.ExpiresAt, before, before.Add(req.Approval.Timeout))
	}
	return *a
}

func (f *fixture) decide(id string, approve bool, by, note string) idempotency.Record {
	f.t.Helper()
	rec, err := f.approvals().DecideApproval(f.ctx, id, idempotency.ApprovalDecision{Approve: approve, By: by, Note: note})
	if err != nil {
		f.t.Fatalf("DecideApproval(%s, %v): %v", id, approve, err)
	}
	return rec
}

// expectNotPending decides id and requires an *ApprovalNotPendingError in
// state want, naming by (when not "").
func (f *fixture) expectNotPending(id string, want idempotency.State, by string) {
	f.t.Helper()
	_, err := f.approvals().DecideApproval(f.ctx, id, idempotency.ApprovalDecision{Approve: true, By: "late-operator"})
	var np *idempotency.ApprovalNotPendingError
	if !errors.As(err, &np) || !errors.Is(err, idempotency.ErrApprovalNotPending) {
		f.t.Fatalf("DecideApproval(%s) = %v, want ErrApprovalNotPending", id, err)
	}
	if np.State != want || np.DecidedBy != by || (by != "" && np.DecidedAt.IsZero()) {
		f.t.Fatalf("not pending: %+v, want state %s decided by %q", np, want, by)
	}
}

func testApprovalPending(f *fixture) {
	req := f.approvalRequest(f.scope("refund", "pending"), fingerprintA, f.step("pending", 1))
	first := f.pending(req)

	// Every retry answers the same approval, not its own new id.
	again := f.expect(f.again(req), idempotency.OutcomeAwaitingApproval)
	if again.Approval == nil || again.Approval.ID != first.ID || !again.Approval.ExpiresAt.Equal(first.ExpiresAt) {
		f.t.Errorf("retry's approval = %+v, want the first %+v", again.Approval, first)
	}
	for _, rec := range []idempotency.Record{f.get(req.Scope), f.getApproval(first.ID)} {
		a := rec.Approval
		if rec.State != idempotency.StateAwaitingApproval || a == nil || a.ID != first.ID || a.Rule != 1 ||
			a.Reason != req.Approval.Reason || a.Approver != idempotency.ApproverOperator || a.DecidedBy != "" {
			f.t.Fatalf("record = %+v approval %+v, want AWAITING_APPROVAL with the request's approval", rec, a)
		}
		if rec.Scope != req.Scope || rec.Fingerprint != fingerprintA || string(rec.CanonicalArguments) != `{"amount":2000}` ||
			rec.Step == nil || *rec.Step != *req.Step {
			f.t.Errorf("record = %+v, want the call's scope, fingerprint, arguments and step", rec)
		}
	}
}

func (f *fixture) getApproval(id string) idempotency.Record {
	f.t.Helper()
	rec, err := f.approvals().GetApproval(f.ctx, id)
	if err != nil {
		f.t.Fatalf("GetApproval(%s): %v", id, err)
	}
	return rec
}

func testApprovalPendingStepConflict(f *fixture) {
	step := f.step("approval-step", 3)
	req := f.approvalRequest(f.scope("refund", "asked"), fingerprintA, step)
	f.pending(req)
	// Other arguments at the same step: another key, refused by the step
	// guard, so approving 2 000 never lets 5 000 run.
	other := f.approvalRequest(f.scope("refund", "other-amount"), fingerprintB, step)
	d := f.expect(other, idempotency.OutcomeStepConflict)
	if d.Conflict == nil || d.Conflict.Tool != "refund" {
		f.t.Errorf("step conflict = %+v, want the pending refund", d.Conflict)
	}
	f.expect(f.request(f.scope("refund", "other-allowed"), fingerprintB, step), idempotency.OutcomeStepConflict)
}

func testApprovalKeyReused(f *fixture) {
	req := f.approvalRequest(f.scope("refund", "reused"), fingerprintA, nil)
	req.Approval.Approver = "" // recorded as the default, operator
	a := f.pending(req)
	f.expect(f.approvalRequest(req.Scope, fingerprintB, nil), idempotency.OutcomeKeyReused)
	f.decide(a.ID, true, "finance", "")
	f.expect(f.approvalRequest(req.Scope, fingerprintB, nil), idempotency.OutcomeKeyReused)
	f.expect(f.request(req.Scope, fingerprintB, nil), idempotency.OutcomeKeyReused)
}

func testApprovalApprovedIsConsumed(f *fixture) {
	req := f.approvalRequest(f.scope("refund", "approved"), fingerprintA, f.step("approved", 1))
	a := f.pending(req)
	before := time.Now()
	rec := f.decide(a.ID, true, "alice", "checked the order")
	if rec.State != idempotency.StateApproved || rec.Approval == nil || rec.Approval.DecidedBy != "alice" ||
		rec.Approval.Note != "checked the order" || !within(rec.Approval.DecidedAt, before, clockSlack) ||
		!within(rec.Approval.ExpiresAt, before.Add(longApproval), clockSlack) {
		f.t.Fatalf("approved record = %+v approval %+v", rec, rec.Approval)
	}
	if got := f.get(req.Scope); got.State != idempotency.StateApproved {
		f.t.Fatalf("Get after approving: state %s", got.State)
	}

	run := f.again(req)
	d := f.expect(run, idempotency.OutcomeClaimed)
	f.checkLease(run, d)
	if d.TakenOver || d.Approval == nil || d.Approval.ID != a.ID || d.Approval.DecidedBy != "alice" {
		f.t.Errorf("consuming claim = %+v approval %+v, want a first claim carrying alice's approval", d, d.Approval)
	}
	got := f.get(req.Scope)
	if got.State != idempotency.StateInProgress || got.ExecutionID != run.ExecutionID || got.FencingToken != d.Lease.FencingToken {
		f.t.Fatalf("record after consuming = %+v, want IN_PROGRESS of %q", got, run.ExecutionID)
	}
	// The approval stays on the record as history: CONSUMED.
	f.expectConsumed(a.ID, "alice")
	// An ordinary record from now on: in progress, then replayed.
	f.expect(f.again(req), idempotency.OutcomeInProgress)
	f.complete(d.Lease, jsonResponse(`{"refunded":2000}`), replayTTL)
	f.expectConsumed(a.ID, "alice")
	f.expectApprovals(idempotency.ApprovalFilter{State: idempotency.StateConsumed, Tool: "refund"}, a.ID)
	f.expectApprovals(idempotency.ApprovalFilter{State: idempotency.StateApproved, Tool: "refund"})
	replay := f.expect(f.again(req), idempotency.OutcomeReplay)
	if replay.ExecutionID != run.ExecutionID || !sameResponse(replay.Response, jsonResponse(`{"refunded":2000}`)) {
		f.t.Errorf("replay = %+v", replay)
	}
	// The step stays with the call.
	f.expect(f.request(f.scope("refund", "approved-other"), fingerprintB, req.Step), idempotency.OutcomeStepConflict)
}

func testApprovalApprovedConsumedByAllow(f *fixture) {
	req := f.approvalRequest(f.scope("refund", "approved-allow"), fingerprintA, nil)
	a := f.pending(req)
	f.decide(a.ID, true, "alice", "")
	run := f.fresh(req)
	run.Approval = nil // the rules allow it now: it runs, once
	d := f.expect(run, idempotency.OutcomeClaimed)
	f.checkLease(run, d)
	f.expect(f.again(req), idempotency.OutcomeInProgress)
}

func testApprovalAllowClaimsPending(f *fixture) {
	req := f.approvalRequest(f.scope("refund", "pending-allow"), fingerprintA, f.step("pending-allow", 2))
	a := f.pending(req)
	run := f.fresh(req)
	run.Approval = nil
	d := f.expect(run, idempotency.OutcomeClaimed)
	f.checkLease(run, d)
	// The pending approval the allowed call used up is history, with no
	// decision.
	f.expectConsumed(a.ID, "")
}

func testApprovalDenied(f *fixture) {
	req := f.approvalRequest(f.scope("refund", "denied"), fingerprintA, nil)
	a := f.pending(req)
	rec := f.decide(a.ID, false, "bob", "not this customer")
	if rec.State != idempotency.StateDenied || rec.Approval == nil || rec.Approval.DecidedBy != "bob" {
		f.t.Fatalf("denied record = %+v", rec)
	}
	if !within(rec.ExpiresAt, time.Now().Add(replayTTL), clockSlack) {
		f.t.Errorf("denied record expires %v, want about replay TTL from now", rec.ExpiresAt)
	}
	if !rec.Approval.ExpiresAt.Equal(a.ExpiresAt) {
		f.t.Errorf("denied approval expires %v, want its original expiry %v", rec.Approval.ExpiresAt, a.ExpiresAt)
	}
	for _, r := range []idempotency.ClaimRequest{f.again(req), func() idempotency.ClaimRequest { r := f.fresh(req); r.Approval = nil; return r }()} {
		d := f.expect(r, idempotency.OutcomeApprovalDenied)
		if d.Approval == nil || d.Approval.ID != a.ID || d.Approval.DecidedBy != "bob" || d.Approval.Note != "not this customer" || d.Approval.Reason != req.Approval.Reason {
			f.t.Errorf("denied decision approval = %+v", d.Approval)
		}
	}
	f.expectNotPending(a.ID, idempotency.StateDenied, "bob")
}

func testApprovalPendingExpires(f *fixture) {
	req := f.approvalRequest(f.scope("refund", "pending-expires"), fingerprintA, nil)
	req.Approval.Timeout = shortApproval
	a := f.pending(req)
	time.Sleep(expireWait)
	d := f.expect(f.again(req), idempotency.OutcomeApprovalExpired)
	if d.Approval == nil || d.Approval.ID != a.ID {
		f.t.Errorf("expired decision approval = %+v, want %q", d.Approval, a.ID)
	}
	allowed := f.fresh(req)
	allowed.Approval = nil
	f.expect(allowed, idempotency.OutcomeApprovalExpired)
	if got := f.get(req.Scope); got.State != idempotency.StateExpired {
		f.t.Errorf("Get of an expired approval: state %s", got.State)
	}
	if got := f.getApproval(a.ID); got.State != idempotency.StateExpired {
		f.t.Errorf("GetApproval of an expired approval: state %s", got.State)
	}
	f.expectNotPending(a.ID, idempotency.StateExpired, "")
	f.expectApprovals(idempotency.ApprovalFilter{State: idempotency.StateExpired}, a.ID)
	f.expectApprovals(idempotency.ApprovalFilter{State: idempotency.StateAwaitingApproval})
}

func testApprovalApprovedExpires(f *fixture) {
	req := f.approvalRequest(f.scope("refund", "approved-expires"), fingerprintA, nil)
	req.Approval.UseWithin = shortApproval
	a := f.pending(req)
	f.decide(a.ID, true, "alice", "")
	time.Sleep(expireWait)
	f.expect(f.again(req), idempotency.OutcomeApprovalExpired)
	if got := f.get(req.Scope); got.State != idempotency.StateExpired || got.Approval == nil || got.Approval.DecidedBy != "alice" {
		f.t.Errorf("Get of an approval not used in time: %+v", got)
	}
	f.expectNotPending(a.ID, idempotency.StateExpired, "alice")
}

func testApprovalDecideTwice(f *fixture) {
	req := f.approvalRequest(f.scope("refund", "twice"), fingerprintA, nil)
	a := f.pending(req)
	first := f.decide(a.ID, true, "alice", "")
	f.expectNotPending(a.ID, idempotency.StateApproved, "alice")
	if _, err := f.approvals().DecideApproval(f.ctx, a.ID, idempotency.ApprovalDecision{Approve: false, By: "bob", Note: "no"}); !errors.Is(err, idempotency.ErrApprovalNotPending) {
		f.t.Fatalf("deny after approve = %v, want ErrApprovalNotPending", err)
	}
	if got := f.getApproval(a.ID); got.State != idempotency.StateApproved || got.Approval.DecidedBy != "alice" ||
		!got.Approval.DecidedAt.Equal(first.Approval.DecidedAt) {
		f.t.Errorf("after a refused second decision: %+v", got.Approval)
	}
}

func testApprovalUnknownID(f *fixture) {
	id := ulid.Make().String()
	if _, err := f.approvals().GetApproval(f.ctx, id); !errors.Is(err, idempotency.ErrNotFound) {
		f.t.Errorf("GetApproval(unknown) = %v, want ErrNotFound", err)
	}
	if _, err := f.approvals().DecideApproval(f.ctx, id, idempotency.ApprovalDecision{Approve: true, By: "alice"}); !errors.Is(err, idempotency.ErrNotFound) {
		f.t.Errorf("DecideApproval(unknown) = %v, want ErrNotFound", err)
	}
	// An ordinary record is no approval.
	f.claimed(f.request(f.scope("refund", "plain"), fingerprintA, nil))
	f.expectApprovals(idempotency.ApprovalFilter{})
}

// testApprovalNotResolvable: nothing ran for an approval record, so an
// operator has no effect to resolve it with, whatever its state.
func testApprovalNotResolvable(f *fixture) {
	pending := f.approvalRequest(f.scope("refund", "resolve-pending"), fingerprintA, nil)
	f.pending(pending)
	approved := f.approvalRequest(f.scope("refund", "resolve-approved"), fingerprintA, nil)
	f.decide(f.pending(approved).ID, true, "alice", "")
	for _, scope := range []idempotency.Scope{pending.Scope, approved.Scope} {
		before := f.get(scope)
		if _, err := f.admin().Resolve(f.ctx, scope, jsonResponse(`{}`), replayTTL); !errors.Is(err, idempotency.ErrNotResolvable) {
			f.t.Errorf("Resolve(%s %s) = %v, want ErrNotResolvable", scope.Key, before.State, err)
		}
		if after := f.get(scope); after.State != before.State {
			f.t.Errorf("Resolve changed %s from %s to %s", scope.Key, before.State, after.State)
		}
	}
}

// testApprovalRecordDeleted: an operator's Delete takes the approval and
// the step with the record; the call asks again, under a new approval.
func testApprovalRecordDeleted(f *fixture) {
	req := f.approvalRequest(f.scope("refund", "deleted"), fingerprintA, f.step("deleted", 1))
	a := f.pending(req)
	f.delete(req.Scope)
	if _, err := f.approvals().GetApproval(f.ctx, a.ID); !errors.Is(err, idempotency.ErrNotFound) {
		f.t.Errorf("GetApproval after Delete = %v, want ErrNotFound", err)
	}
	if _, err := f.approvals().DecideApproval(f.ctx, a.ID, idempotency.ApprovalDecision{Approve: true, By: "alice"}); !errors.Is(err, idempotency.ErrNotFound) {
		f.t.Errorf("DecideApproval after Delete = %v, want ErrNotFound", err)
	}
	next := f.again(req)
	if b := f.pending(next); b.ID == a.ID {
		f.t.Errorf("the call asked again under the deleted approval %s", a.ID)
	}
	f.expectApprovals(idempotency.ApprovalFilter{}, next.Approval.ID)
}

// expectApprovals fails unless listing filter yields exactly the
// approvals ids (as a set).
func (f *fixture) expectApprovals(filter idempotency.ApprovalFilter, ids ...string) {
	f.t.Helper()
	if filter.Limit == 0 {
		filter.Limit = 100
	}
	var got []string
	for pages := 0; ; pages++ {
		if pages > 1000 {
			f.t.Fatalf("ListApprovals(%+v) did not end", filter)
		}
		page, err := f.approvals().ListApprovals(f.ctx, filter)
		if err != nil {
			f.t.Fatalf("ListApprovals(%+v): %v", filter, err)
		}
		if len(page.Records) > filter.Limit {
			f.t.Fatalf("ListApprovals returned %d records, above the limit %d", len(page.Records), filter.Limit)
		}
		for _, r := range page.Records {
			if r.Approval == nil || r.CanonicalArguments != nil || (filter.State != "" && r.State != filter.State) {
				f.t.Fatalf("ListApprovals(%+v) shows %+v", filter, r)
			}
			got = append(got, r.Approval.ID)
		}
		if page.Cursor == "" {
			break
		}
		filter.Cursor = page.Cursor
	}
	seen := map[string]int{}
	for _, id := range got {
		seen[id]++
	}
	ok := len(got) == len(ids)
	for _, id := range ids {
		ok = ok && seen[id] == 1
	}
	if !ok {
		f.t.Fatalf("ListApprovals(%+v) = %v, want exactly %v", filter, got, ids)
	}
}

func testApprovalList(f *fixture) {
	scope := func(tenant, tool string) idempotency.Scope {
		return idempotency.Scope{Tenant: tenant, Tool: tool, Key: f.id("k")}
	}
	waitA := f.pending(f.approvalRequest(scope("tenant-a", "refund"), fingerprintA, nil))
	waitB := f.pending(f.approvalRequest(scope("tenant-b", "refund"), fingerprintA, nil))
	mailA := f.pending(f.approvalRequest(scope("tenant-a", "mail"), fingerprintA, nil))
	approved := f.pending(f.approvalRequest(scope("tenant-a", "refund"), fingerprintA, nil))
	f.decide(approved.ID, true, "alice", "")
	denied := f.pending(f.approvalRequest(scope("tenant-b", "mail"), fingerprintA, nil))
	f.decide(denied.ID, false, "bob", "no")
	plain := f.request(scope("tenant-a", "refund"), fingerprintA, nil)
	f.claimed(plain)

	f.expectApprovals(idempotency.ApprovalFilter{}, waitA.ID, waitB.ID, mailA.ID, approved.ID, denied.ID)
	f.expectApprovals(idempotency.ApprovalFilter{State: idempotency.StateAwaitingApproval}, waitA.ID, waitB.ID, mailA.ID)
	f.expectApprovals(idempotency.ApprovalFilter{State: idempotency.StateApproved}, approved.ID)
	f.expectApprovals(idempotency.ApprovalFilter{State: idempotency.StateDenied}, denied.ID)
	f.expectApprovals(idempotency.ApprovalFilter{Tenant: "tenant-a"}, waitA.ID, mailA.ID, approved.ID)
	f.expectApprovals(idempotency.ApprovalFilter{Tenant: "tenant-a", Tool: "refund", State: idempotency.StateAwaitingApproval}, waitA.ID)
	f.expectApprovals(idempotency.ApprovalFilter{Tool: "mail"}, mailA.ID, denied.ID)

	// The records gauge lists the new states through Admin.List.
	pending := f.listAll(idempotency.ListFilter{State: idempotency.StateAwaitingApproval, Limit: 100})
	if len(pending) != 3 {
		f.t.Errorf("List(AWAITING_APPROVAL) = %d records, want 3", len(pending))
	}
	f.expectListed(idempotency.ListFilter{State: idempotency.StateInProgress}, plain.Scope)

	for _, bad := range []idempotency.ApprovalFilter{{State: idempotency.StateCompleted, Limit: 10}, {Limit: 0}, {Limit: idempotency.MaxListLimit + 1}} {
		if _, err := f.approvals().ListApprovals(f.ctx, bad); err == nil {
			f.t.Errorf("ListApprovals(%+v) succeeded, want an error", bad)
		}
	}
}

func testApprovalListPagination(f *fixture) {
	var ids []string
	for i := range 7 {
		ids = append(ids, f.pending(f.approvalRequest(f.scope("refund", fmt.Sprintf("page-%d", i)), fingerprintA, nil)).ID)
	}
	f.expectApprovals(idempotency.ApprovalFilter{Limit: 2}, ids...)
	f.expectApprovals(idempotency.ApprovalFilter{Limit: 1, State: idempotency.StateAwaitingApproval}, ids...)
}

func testApprovalConcurrentClaimsOfApproved(f *fixture) {
	const claimants = 8
	req := f.approvalRequest(f.scope("refund", "approved-race"), fingerprintA, f.step("approved-race", 1))
	a := f.pending(req)
	f.decide(a.ID, true, "alice", "")
	var reqs []idempotency.ClaimRequest
	for range claimants {
		reqs = append(reqs, f.again(req))
	}
	decisions := f.race(reqs, nil)
	winner := f.onlyWinner(reqs, decisions, "the approved call")
	for _, d := range decisions {
		if d.Outcome != idempotency.OutcomeClaimed && (d.Outcome != idempotency.OutcomeInProgress || d.ExecutionID != winner) {
			f.t.Errorf("loser decision %v naming %q, want in_progress of %q", d.Outcome, d.ExecutionID, winner)
		}
	}
}

// testApprovalApproveRacesClaim decides and claims at once, many times:
// the claim either saw the approval pending (and the next claim runs it)
// or consumed it, never anything else, and it runs exactly once.
func testApprovalApproveRacesClaim(f *fixture) {
	for round := range 10 {
		req := f.approvalRequest(f.scope("refund", fmt.Sprintf("approve-race-%d", round)), fingerprintA, nil)
		a := f.pending(req)
		run := f.again(req)
		start := make(chan struct{})
		var (
			d        idempotency.Decision
			claimErr error
			decided  = make(chan error, 1)
		)
		go func() {
			<-start
			_, err := f.approvals().DecideApproval(f.ctx, a.ID, idempotency.ApprovalDecision{Approve: true, By: "alice"})
			decided <- err
		}()
		close(start)
		d, claimErr = f.store.Claim(f.ctx, run)
		if err := <-decided; err != nil {
			f.t.Fatalf("round %d: DecideApproval: %v", round, err)
		}
		if claimErr != nil {
			f.t.Fatalf("round %d: Claim: %v", round, claimErr)
		}
		switch d.Outcome {
		case idempotency.OutcomeClaimed:
		case idempotency.OutcomeAwaitingApproval:
			f.expect(f.again(req), idempotency.OutcomeClaimed)
		default:
			f.t.Fatalf("round %d: claim racing the approval: %v", round, d.Outcome)
		}
		f.expect(f.again(req), idempotency.OutcomeInProgress)
	}
}

func testApprovalConcurrentDecisions(f *fixture) {
	const deciders = 8
	req := f.approvalRequest(f.scope("refund", "decide-race"), fingerprintA, nil)
	a := f.pending(req)
	errs := make([]error, deciders)
	start := make(chan struct{})
	done := make(chan int, deciders)
	for i := range deciders {
		go func() {
			<-start
			_, errs[i] = f.approvals().DecideApproval(f.ctx, a.ID,
				idempotency.ApprovalDecision{Approve: i%2 == 0, By: fmt.Sprintf("operator-%d", i), Note: "n"})
			done <- i
		}()
	}
	close(start)
	for range deciders {
		<-done
	}
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			f.t.Fatalf("approval decided twice: by operator-%d and operator-%d", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, idempotency.ErrApprovalNotPending):
			f.t.Fatalf("operator-%d: %v, want ErrApprovalNotPending", i, err)
		}
	}
	if winner < 0 {
		f.t.Fatalf("nobody decided the approval")
	}
	want := idempotency.StateApproved
	if winner%2 == 1 {
		want = idempotency.StateDenied
	}
	if got := f.getApproval(a.ID); got.State != want || got.Approval.DecidedBy != fmt.Sprintf("operator-%d", winner) {
		f.t.Errorf("record after the race = %s by %q, want %s by operator-%d", got.State, got.Approval.DecidedBy, want, winner)
	}
	var np *idempotency.ApprovalNotPendingError
	for i, err := range errs {
		if i != winner && errors.As(err, &np) && np.DecidedBy != fmt.Sprintf("operator-%d", winner) {
			f.t.Errorf("operator-%d's refusal names %q, want operator-%d", i, np.DecidedBy, winner)
		}
	}
}

// expectConsumed requires approval id to show as CONSUMED wherever it is
// read (GetApproval, a listing, a late decision's refusal), keeping its
// approval data, decided by by ("" for none).
func (f *fixture) expectConsumed(id, by string) {
	f.t.Helper()
	got := f.getApproval(id)
	a := got.Approval
	if got.State != idempotency.StateConsumed || a == nil || a.ID != id || a.DecidedBy != by || a.RequestedAt.IsZero() || a.ExpiresAt.IsZero() {
		f.t.Fatalf("GetApproval of a consumed approval: %s %+v, want CONSUMED decided by %q", got.State, a, by)
	}
	if listed := f.listed(id); listed.State != idempotency.StateConsumed || listed.Approval.DecidedBy != by {
		f.t.Fatalf("listed consumed approval: %s by %q", listed.State, listed.Approval.DecidedBy)
	}
	f.expectNotPending(id, idempotency.StateConsumed, by)
}
