package storetest

import (
	"errors"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// The effect life cases: an effect's reservation lives as long as its
// holder's record, through every path that extends or completes the
// record after the claim, and an approval survives losing an effect race.
// The TTLs are scaled down: the holder claims with a short lease and a
// short replay TTL, the path under test makes its record live replayTTL
// (a minute), and the case waits well past the claim's lock + replay
// before another session asks for the same effect. A reservation sized at
// the claim (or at an UNKNOWN marking) and not extended with the record
// has expired by then, and that session would run the effect a second
// time; it must replay the holder or meet effect_conflict instead.
func effectLifeCases() []testCase {
	return []testCase{
		{"EffectOutlivesReconciledHolder", testEffectOutlivesReconciledHolder},
		{"EffectOutlivesResolvedHolder", testEffectOutlivesResolvedHolder},
		{"EffectOutlivesReconcileThenResolve", testEffectOutlivesReconcileThenResolve},
		{"EffectOutlivesLateCompletion", testEffectOutlivesLateCompletion},
		{"EffectOutlivesTakeover", testEffectOutlivesTakeover},
		{"EffectApprovalSurvivesLostRace", testEffectApprovalSurvivesLostRace},
		{"EffectApprovalKeptOnConflict", testEffectApprovalKeptOnConflict},
		{"EffectPendingApprovalHoldsEffect", testEffectPendingApprovalHoldsEffect},
		{"EffectOutlivesLongRun", testEffectOutlivesLongRun},
	}
}

// Scaled TTLs of the effect life cases: the claim's record would live
// shortLease + shortReplay; the case waits outliveWait before the other
// session's call. A case whose holder's record must still be there well
// after its lease ran out (for a takeover, or for an operator to resolve
// it after reconciliation turned it UNKNOWN for its replay TTL) claims
// with holderReplay instead: seconds, so that a loaded machine stalling
// the case between two steps cannot let the record expire first. Such a
// case then waits past that TTL as well, so a reservation sized at the
// claim or at the UNKNOWN marking would be gone by the check.
const (
	shortReplay  = 600 * time.Millisecond
	holderReplay = 3 * time.Second
	outliveWait  = 2000 * time.Millisecond
)

// shortHolder claims effect for a holder with a short lease and replay
// TTL, and returns its request and lease.
func (f *fixture) shortHolder(effect string, expiry idempotency.LeaseExpiry) (idempotency.ClaimRequest, idempotency.Lease) {
	f.t.Helper()
	return f.holderReplaying(effect, expiry, shortReplay)
}

// holderReplaying claims effect for a holder with a short lease and the
// replay TTL replay, and returns its request and lease.
func (f *fixture) holderReplaying(effect string, expiry idempotency.LeaseExpiry, replay time.Duration) (idempotency.ClaimRequest, idempotency.Lease) {
	f.t.Helper()
	req := f.effectRequest("refund", "holder", effect, fingerprintA, 0)
	req.LockTTL, req.ReplayTTL, req.LeaseExpiry = shortLease, replay, expiry
	req.CanonicalArguments = []byte(`{"txn":"` + effect + `"}`)
	return req, f.claimed(req)
}

// expectEffectHeld checks, once the claim's TTLs are long past, that the
// effect still answers as holder's record (COMPLETED with resp): the
// same arguments from another session replay it, other arguments meet
// effect_conflict, and neither writes a record; and the admin API still
// finds the holder's record first (Get, on every store: on Redis Cluster
// through the scope's pointer).
func (f *fixture) expectEffectHeld(holder idempotency.ClaimRequest, resp idempotency.StoredResponse) {
	f.t.Helper()
	time.Sleep(outliveWait)
	rec, err := f.store.Get(f.ctx, holder.Scope)
	if err != nil || rec.State != idempotency.StateCompleted || rec.ExecutionID != holder.ExecutionID {
		f.t.Fatalf("Get of the holder = %s %q, %v; want COMPLETED %q (it still replays)", rec.State, rec.ExecutionID, err, holder.ExecutionID)
	}
	same := f.effectRequest("refund", "later", holder.Effect.Value, fingerprintA, 7)
	d := f.claim(same)
	if d.Outcome != idempotency.OutcomeReplay || !d.ByEffect || d.ExecutionID != holder.ExecutionID || !sameResponse(d.Response, resp) {
		f.t.Fatalf("same effect from another session after the holder's claim TTLs: %v (ByEffect %v, execution %q), want a replay of %q: the effect would run twice",
			d.Outcome, d.ByEffect, d.ExecutionID, holder.ExecutionID)
	}
	other := f.effectRequest("refund", "other", holder.Effect.Value, fingerprintB, 8)
	d = f.claim(other)
	if d.Outcome != idempotency.OutcomeEffectConflict || d.EffectHolder == nil || d.EffectHolder.ExecutionID != holder.ExecutionID {
		f.t.Fatalf("other arguments for the held effect: %v (holder %+v), want effect_conflict naming %q", d.Outcome, d.EffectHolder, holder.ExecutionID)
	}
	f.expectNotFound(same.Scope)
	f.expectNotFound(other.Scope)
}

// testEffectOutlivesReconciledHolder: an UNKNOWN holder that
// reconciliation completes keeps its effect as long as its record.
func testEffectOutlivesReconciledHolder(f *fixture) {
	if !f.keepsEffects() {
		return
	}
	rc := f.reconciler()
	holder, lease := f.shortHolder("refund:reconciled", idempotency.LeaseExpiryUnknown)
	f.markUnknown(lease, shortReplay)
	owner := f.id("reconciler")
	if _, err := rc.ClaimReconcile(f.ctx, holder.Scope, owner, longLease); err != nil {
		f.t.Fatalf("ClaimReconcile: %v", err)
	}
	resp := jsonResponse(`{"refund":"reconciled"}`)
	if _, err := rc.CompleteReconciled(f.ctx, holder.Scope, owner, lease.FencingToken, resp, replayTTL); err != nil {
		f.t.Fatalf("CompleteReconciled: %v", err)
	}
	f.expectEffectHeld(holder, resp)
	if rec := f.get(holder.Scope); rec.ResolvedBy != idempotency.ResolvedByReconcile {
		f.t.Errorf("holder resolved by %q, want %q", rec.ResolvedBy, idempotency.ResolvedByReconcile)
	}
}

// testEffectOutlivesResolvedHolder: an operator resolves an UNKNOWN
// holder long after it turned UNKNOWN; the effect lives as long as the
// resolved record. The UNKNOWN record lives holderReplay, so a stall of
// the case before the resolution cannot let it expire first on a server's
// real clock, and the case waits past that TTL before its checks, so a
// reservation sized at the marking would be gone by then.
func testEffectOutlivesResolvedHolder(f *fixture) {
	if !f.keepsEffects() {
		return
	}
	holder, lease := f.shortHolder("refund:resolved", idempotency.LeaseExpiryUnknown)
	markedAt := time.Now()
	f.markUnknown(lease, holderReplay)
	time.Sleep(shortReplay)
	resp := jsonResponse(`{"refund":"resolved"}`)
	f.resolve(holder.Scope, resp, replayTTL)
	time.Sleep(time.Until(markedAt.Add(holderReplay)))
	f.expectEffectHeld(holder, resp)
}

// testEffectOutlivesReconcileThenResolve: reconciliation takes an
// abandoned holder (its lease ran out: it turns UNKNOWN), records an
// attempt that could not tell, and an operator resolves it later.
//
// Taking the abandoned record over turns it UNKNOWN for its claim's
// replay TTL, counted from then: the resolution must land within it, so
// the holder claims with holderReplay. With shortReplay only 300 ms were
// left between the case's sleep and the record's end on the real clock of
// Redis and PostgreSQL: a stall longer than that let the record expire
// before Resolve could find it (the case failed once on Redis under load).
func testEffectOutlivesReconcileThenResolve(f *fixture) {
	if !f.keepsEffects() {
		return
	}
	rc := f.reconciler()
	holder, lease := f.holderReplaying("refund:reconcile-then-resolve", idempotency.LeaseExpiryUnknown, holderReplay)
	time.Sleep(expireWait)
	owner := f.id("reconciler")
	rec, err := rc.ClaimReconcile(f.ctx, holder.Scope, owner, longLease)
	if err != nil || rec.State != idempotency.StateUnknown {
		f.t.Fatalf("ClaimReconcile of the abandoned holder = %s, %v; want UNKNOWN", rec.State, err)
	}
	markedUnknown := time.Now() // no earlier than the store's marking
	attempt := idempotency.ReconcileAttempt{At: time.Now(), Outcome: "unknown", Detail: "owner cannot tell"}
	if _, err := rc.RecordReconcileAttempt(f.ctx, holder.Scope, owner, lease.FencingToken, attempt); err != nil {
		f.t.Fatalf("RecordReconcileAttempt: %v", err)
	}
	time.Sleep(shortReplay / 2)
	resp := jsonResponse(`{"refund":"resolved after reconcile"}`)
	f.resolve(holder.Scope, resp, replayTTL)
	// Past the UNKNOWN marking's replay TTL (which ends after the claim's
	// lease + replay TTL), so a reservation sized at either is gone.
	time.Sleep(time.Until(markedUnknown.Add(holderReplay)))
	f.expectEffectHeld(holder, resp)
}

// testEffectOutlivesLateCompletion: the holder's lease ran out while the
// store did not answer, nobody took it over, and its completion is
// recorded late, for the replay TTL. The holder claims with holderReplay,
// so its record is still there for the late completion however long the
// case stalls before it, and the case waits past the claim's lease and
// replay TTL before its checks, so a reservation sized at the claim would
// be gone by then.
func testEffectOutlivesLateCompletion(f *fixture) {
	if !f.keepsEffects() {
		return
	}
	claimedAt := time.Now()
	holder, lease := f.holderReplaying("refund:late", idempotency.LeaseExpiryRerun, holderReplay)
	time.Sleep(expireWait)
	resp := jsonResponse(`{"refund":"late"}`)
	f.complete(lease, resp, replayTTL)
	time.Sleep(time.Until(claimedAt.Add(shortLease + holderReplay)))
	f.expectEffectHeld(holder, resp)
}

// testEffectOutlivesTakeover: the holder's gateway died, another
// session's call took its record over (by effect) and completed it.
func testEffectOutlivesTakeover(f *fixture) {
	if !f.keepsEffects() {
		return
	}
	// The holder's record must still be there when its lease has run out
	// (else the next call is a fresh claim, not a takeover): holderReplay.
	claimedAt := time.Now()
	holder, _ := f.holderReplaying("refund:takeover", idempotency.LeaseExpiryRerun, holderReplay)
	time.Sleep(expireWait)
	next := f.effectRequest("refund", "next", holder.Effect.Value, fingerprintA, 3)
	next.LockTTL, next.ReplayTTL = shortLease, shortReplay
	d := f.expect(next, idempotency.OutcomeClaimed)
	if !d.TakenOver || !d.ByEffect || d.Lease.Scope != holder.Scope {
		f.t.Fatalf("takeover by effect = %+v, want a takeover of the holder's record", d)
	}
	resp := jsonResponse(`{"refund":"taken over"}`)
	f.complete(d.Lease, resp, replayTTL)
	holder.ExecutionID = next.ExecutionID // the record's execution now
	time.Sleep(time.Until(claimedAt.Add(shortLease + holderReplay)))
	f.expectEffectHeld(holder, resp)
}

// approvedEffectCall is a call of effect from session whose rules ask
// for approval, pending and then approved; it returns the request (with
// its effect) and the approval's id. The approval is asked for without
// the effect, so that two calls of one effect can both be approved on
// every store: on Redis a call waiting for approval never holds its
// effect, so two of them wait side by side; on the embedded and
// PostgreSQL stores a waiting call holds it, and two calls get there only
// when the tool's effect_key was configured while they waited.
func (f *fixture) approvedEffectCall(session, effect, fingerprint string) (idempotency.ClaimRequest, string) {
	f.t.Helper()
	req := f.approvalRequest(f.scope("refund", f.id("key")), fingerprint, f.step(session+"-"+f.run, 1))
	a := f.pending(req)
	f.decide(a.ID, true, "alice", "")
	req.Effect = &idempotency.Effect{Value: effect}
	return req, a.ID
}

// expectStillApproved requires approval id to be APPROVED and unused on
// the record of scope.
func (f *fixture) expectStillApproved(id string, scope idempotency.Scope, what string) {
	f.t.Helper()
	rec, err := f.approvals().GetApproval(f.ctx, id)
	if err != nil {
		f.t.Fatalf("%s: GetApproval = %v, want the approval kept", what, err)
	}
	if rec.State != idempotency.StateApproved || rec.Scope != scope {
		f.t.Fatalf("%s: approval is %s on %v, want APPROVED on %v", what, rec.State, rec.Scope, scope)
	}
}

// testEffectApprovalSurvivesLostRace: two approved calls (two sessions,
// the same arguments) race one effect value. One runs; the other keeps
// its approval, and every later call of it answers as the holder (in
// progress, then a replay): no call of it asks a person again (no new
// pending approval), whatever approval id its request carries.
func testEffectApprovalSurvivesLostRace(f *fixture) {
	if !f.keepsEffects() {
		return
	}
	const effect = "refund:approved-race"
	one, oneID := f.approvedEffectCall("one", effect, fingerprintA)
	two, twoID := f.approvedEffectCall("two", effect, fingerprintA)
	reqs := []idempotency.ClaimRequest{f.again(one), f.again(two)}
	decisions := f.race(reqs, nil)
	winner, loser, loserID := -1, -1, ""
	for i, d := range decisions {
		switch d.Outcome {
		case idempotency.OutcomeClaimed:
			if winner >= 0 {
				f.t.Fatalf("both approved calls claimed effect %s", effect)
			}
			winner = i
		case idempotency.OutcomeInProgress:
			if !d.ByEffect {
				f.t.Fatalf("loser in progress, but not by effect: %+v", d)
			}
			loser = i
		default:
			f.t.Fatalf("approved call %d: outcome %v, want claimed or in progress by effect", i, d.Outcome)
		}
	}
	if winner < 0 || loser < 0 {
		f.t.Fatalf("decisions %+v: want one claim and one in progress", decisions)
	}
	loserReq := []idempotency.ClaimRequest{one, two}[loser]
	loserID = []string{oneID, twoID}[loser]
	f.expectStillApproved(loserID, loserReq.Scope, "after losing the race")
	f.complete(decisions[winner].Lease, jsonResponse(`{"refund":"once"}`), replayTTL)

	// The loser's next calls replay the winner's answer; its approval
	// stays, and no call of it waits for a person again.
	for range 2 {
		d := f.claim(f.again(loserReq))
		if d.Outcome != idempotency.OutcomeReplay || !d.ByEffect || d.ExecutionID != reqs[winner].ExecutionID {
			f.t.Fatalf("the loser's next call: %v (ByEffect %v, execution %q), want a replay of %q (awaiting approval asks a person again)",
				d.Outcome, d.ByEffect, d.ExecutionID, reqs[winner].ExecutionID)
		}
		f.expectStillApproved(loserID, loserReq.Scope, "after the loser's replay")
	}
	filter := idempotency.ApprovalFilter{State: idempotency.StateAwaitingApproval, Tenant: loserReq.Scope.Tenant, Limit: 100}
	for {
		page, err := f.approvals().ListApprovals(f.ctx, filter)
		if err != nil {
			f.t.Fatalf("ListApprovals: %v", err)
		}
		for _, rec := range page.Records {
			f.t.Fatalf("a new pending approval (%s) after the race, want none: %+v", rec.Scope, rec.Approval)
		}
		if filter.Cursor = page.Cursor; filter.Cursor == "" {
			break
		}
	}
}

// testEffectApprovalKeptOnConflict: an approved call whose effect another
// call holds with other arguments meets effect_conflict and keeps its
// approval, unused, for its own call.
func testEffectApprovalKeptOnConflict(f *fixture) {
	if !f.keepsEffects() {
		return
	}
	const effect = "refund:approved-conflict"
	holder := f.effectRequest("refund", "holder", effect, fingerprintA, 0)
	lease := f.claimed(holder)
	other, otherID := f.approvedEffectCall("other", effect, fingerprintB)
	for _, state := range []idempotency.State{idempotency.StateInProgress, idempotency.StateCompleted} {
		d := f.claim(f.again(other))
		if d.Outcome != idempotency.OutcomeEffectConflict || d.EffectHolder == nil || d.EffectHolder.ExecutionID != holder.ExecutionID || d.EffectHolder.State != state {
			f.t.Fatalf("approved call with other arguments: %v (holder %+v), want effect_conflict naming %q %s", d.Outcome, d.EffectHolder, holder.ExecutionID, state)
		}
		f.expectStillApproved(otherID, other.Scope, "after effect_conflict")
		if state == idempotency.StateInProgress {
			f.complete(lease, jsonResponse(`{}`), replayTTL)
		}
	}
	// Once the holder is gone, the approved call runs under its approval.
	f.delete(holder.Scope)
	d := f.claim(f.again(other))
	if d.Outcome != idempotency.OutcomeClaimed || d.Approval == nil || d.Approval.ID != otherID {
		f.t.Fatalf("approved call once the effect is free: %v (approval %+v), want a claim consuming %s", d.Outcome, d.Approval, otherID)
	}
	if _, err := f.approvals().GetApproval(f.ctx, otherID); err != nil && !errors.Is(err, idempotency.ErrNotFound) {
		f.t.Fatalf("GetApproval after the run: %v", err)
	}
}

// pendingApprovals lists the pending approvals of tenant-a.
func (f *fixture) pendingApprovals() []idempotency.Record {
	f.t.Helper()
	var out []idempotency.Record
	filter := idempotency.ApprovalFilter{State: idempotency.StateAwaitingApproval, Tenant: "tenant-a", Limit: 100}
	for {
		page, err := f.approvals().ListApprovals(f.ctx, filter)
		if err != nil {
			f.t.Fatalf("ListApprovals: %v", err)
		}
		out = append(out, page.Records...)
		if filter.Cursor = page.Cursor; filter.Cursor == "" {
			return out
		}
	}
}

// testEffectPendingApprovalHoldsEffect: calls of one action whose rules
// ask for approval, from several sessions at once, ask a person once: one
// call waits for approval and holds the effect, the others wait with it
// (in progress by effect) or meet effect_conflict (other arguments); once
// approved, the call runs once and the others replay it.
func testEffectPendingApprovalHoldsEffect(f *fixture) {
	if !f.keepsEffects() {
		return
	}
	const effect, sessions = "refund:approve-once", 6
	reqs := make([]idempotency.ClaimRequest, sessions)
	for i := range reqs {
		req := f.approvalRequest(f.scope("refund", f.id("key")), fingerprintA, f.step(f.id("s"), 1))
		req.Effect = &idempotency.Effect{Value: effect}
		reqs[i] = req
	}
	waiting := -1
	for i, d := range f.race(reqs, nil) {
		switch {
		case d.Outcome == idempotency.OutcomeAwaitingApproval && waiting < 0:
			waiting = i
		case d.Outcome == idempotency.OutcomeInProgress && d.ByEffect:
		default:
			f.t.Fatalf("call %d: %v (ByEffect %v), want one awaiting approval and the others in progress by effect", i, d.Outcome, d.ByEffect)
		}
	}
	if waiting < 0 {
		f.t.Fatalf("no call waits for approval")
	}
	if pending := f.pendingApprovals(); len(pending) != 1 || pending[0].Scope != reqs[waiting].Scope {
		f.t.Fatalf("%d pending approvals, want exactly the waiting call's: a person would be asked %d times", len(pending), len(pending))
	}
	other := f.approvalRequest(f.scope("refund", f.id("key")), fingerprintB, f.step(f.id("s"), 1))
	other.Effect = &idempotency.Effect{Value: effect}
	if d := f.claim(other); d.Outcome != idempotency.OutcomeEffectConflict || d.EffectHolder == nil || d.EffectHolder.State != idempotency.StateAwaitingApproval {
		f.t.Fatalf("other arguments while the action waits for approval: %v (holder %+v), want effect_conflict naming the pending call", d.Outcome, d.EffectHolder)
	}
	f.decide(f.get(reqs[waiting].Scope).Approval.ID, true, "alice", "")
	d := f.expect(f.again(reqs[waiting]), idempotency.OutcomeClaimed)
	resp := jsonResponse(`{"refund":"approved once"}`)
	f.complete(d.Lease, resp, replayTTL)
	for i, req := range reqs {
		if i == waiting {
			continue
		}
		if d := f.claim(f.again(req)); d.Outcome != idempotency.OutcomeReplay || !d.ByEffect || !sameResponse(d.Response, resp) {
			f.t.Fatalf("call %d after the approved run: %v (ByEffect %v), want the replay", i, d.Outcome, d.ByEffect)
		}
	}
	if pending := f.pendingApprovals(); len(pending) != 0 {
		f.t.Fatalf("%d pending approvals after the run, want none", len(pending))
	}
}

// testEffectOutlivesLongRun: a holder whose tool runs far longer than its
// claim's lease + replay TTL, renewing its lease, stays findable by its
// scope (Get) and keeps its effect while it runs, and after it completes.
func testEffectOutlivesLongRun(f *fixture) {
	if !f.keepsEffects() {
		return
	}
	holder, lease := f.shortHolder("refund:long-run", idempotency.LeaseExpiryRerun)
	// Each renewal is good for three renewal periods, and the last for a
	// long lease: on the real clock of a Redis or PostgreSQL server, a
	// loaded machine that stalls the loop (or the checks after it) must
	// not let the lease lapse, which would be a takeover, rightly.
	for end := time.Now().Add(outliveWait); time.Now().Before(end); time.Sleep(shortLease / 3) {
		if err := f.store.Renew(f.ctx, lease, shortLease); err != nil {
			f.t.Fatalf("Renew: %v", err)
		}
	}
	if err := f.store.Renew(f.ctx, lease, longLease); err != nil {
		f.t.Fatalf("Renew: %v", err)
	}
	if rec, err := f.store.Get(f.ctx, holder.Scope); err != nil || rec.State != idempotency.StateInProgress {
		f.t.Fatalf("Get of the running holder = %s, %v; want IN_PROGRESS", rec.State, err)
	}
	d := f.claim(f.effectRequest("refund", "during", holder.Effect.Value, fingerprintA, 5))
	if d.Outcome != idempotency.OutcomeInProgress || !d.ByEffect {
		f.t.Fatalf("same effect while the holder runs: %v (ByEffect %v), want in progress by effect", d.Outcome, d.ByEffect)
	}
	resp := jsonResponse(`{"refund":"long run"}`)
	f.complete(lease, resp, replayTTL)
	f.expectEffectHeld(holder, resp)
}
