package storetest

import (
	"fmt"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

func effectCases() []testCase {
	return []testCase{
		{"EffectReplayAcrossSessions", testEffectReplayAcrossSessions},
		{"EffectConflictNamesHolder", testEffectConflictNamesHolder},
		{"EffectLivesWithItsRecord", testEffectLivesWithItsRecord},
		{"EffectScopedByTenantAndTool", testEffectScopedByTenantAndTool},
		{"EffectTakeoverOfExpiredHolder", testEffectTakeoverOfExpiredHolder},
		{"EffectConcurrentSessions", testEffectConcurrentSessions},
	}
}

// keepsEffects skips a case on a store that does not keep effects; such a
// store must refuse a claim that names one rather than ignore it.
func (f *fixture) keepsEffects() bool {
	f.t.Helper()
	if k, ok := f.store.(idempotency.EffectKeeper); ok && k.KeepsEffects() {
		return true
	}
	req := f.effectRequest("tool", "probe", "refund:probe", fingerprintA, 0)
	if _, err := f.store.Claim(f.ctx, req); err == nil {
		f.t.Fatalf("a store without effect keys accepted a claim naming an effect")
	}
	f.t.Skip("store does not keep effect keys")
	return false
}

// effectRequest is a call of tool with effect value under its own key and
// its own session (session name, step index): another session doing the
// same business action.
func (f *fixture) effectRequest(tool, session, effect, fingerprint string, index uint64) idempotency.ClaimRequest {
	req := f.request(f.scope(tool, f.id("key")), fingerprint, f.step(session+"-"+f.run, index))
	req.Effect = &idempotency.Effect{Value: effect}
	return req
}

func testEffectReplayAcrossSessions(f *fixture) {
	if !f.keepsEffects() {
		return
	}
	first := f.effectRequest("refund", "one", "refund:txn_1", fingerprintA, 0)
	lease := f.claimed(first)
	// While it runs, the same action from another session waits.
	later := f.effectRequest("refund", "two", "refund:txn_1", fingerprintA, 4)
	d := f.expect(later, idempotency.OutcomeInProgress)
	if !d.ByEffect || d.ExecutionID != first.ExecutionID {
		f.t.Errorf("in progress by effect: ByEffect %v, execution %q, want true, %q", d.ByEffect, d.ExecutionID, first.ExecutionID)
	}
	resp := jsonResponse(`{"refund":"r_1"}`)
	f.complete(lease, resp, replayTTL)
	d = f.expect(f.fresh(later), idempotency.OutcomeReplay)
	if !d.ByEffect || d.ExecutionID != first.ExecutionID || !sameResponse(d.Response, resp) {
		f.t.Errorf("replay by effect = %+v, want ByEffect, execution %q, response %s", d, first.ExecutionID, resp.Body)
	}
	// The holder's own retry replays as ever, not "by effect".
	if d := f.expect(f.fresh(first), idempotency.OutcomeReplay); d.ByEffect {
		f.t.Errorf("the holder's own replay reports ByEffect")
	}
	// The later call wrote no record of its own.
	f.expectNotFound(later.Scope)
}

func testEffectConflictNamesHolder(f *fixture) {
	if !f.keepsEffects() {
		return
	}
	first := f.effectRequest("refund", "one", "refund:txn_2", fingerprintA, 0)
	lease := f.claimed(first)
	other := f.effectRequest("refund", "two", "refund:txn_2", fingerprintB, 1)
	for _, want := range []idempotency.State{idempotency.StateInProgress, idempotency.StateCompleted} {
		d := f.expect(f.fresh(other), idempotency.OutcomeEffectConflict)
		if d.EffectHolder == nil || d.EffectHolder.ExecutionID != first.ExecutionID || d.EffectHolder.State != want {
			f.t.Errorf("effect conflict holder = %+v, want %s in %s", d.EffectHolder, first.ExecutionID, want)
		}
		if want == idempotency.StateInProgress {
			f.complete(lease, jsonResponse(`{}`), replayTTL)
		}
	}
	f.expectNotFound(other.Scope)
}

// testEffectLivesWithItsRecord: the reservation goes with a released or
// deleted record, and stays with an UNKNOWN one.
func testEffectLivesWithItsRecord(f *fixture) {
	if !f.keepsEffects() {
		return
	}
	first := f.effectRequest("refund", "one", "refund:txn_3", fingerprintA, 0)
	f.release(f.claimed(first))
	second := f.effectRequest("refund", "two", "refund:txn_3", fingerprintA, 0)
	lease := f.claimed(second)
	f.markUnknown(lease, replayTTL)
	third := f.effectRequest("refund", "three", "refund:txn_3", fingerprintA, 0)
	if d := f.expect(third, idempotency.OutcomeUnknown); !d.ByEffect || d.ExecutionID != second.ExecutionID {
		f.t.Errorf("unknown by effect = %+v, want the UNKNOWN holder %s", d, second.ExecutionID)
	}
	f.delete(second.Scope)
	f.claimed(f.fresh(third))
}

func testEffectScopedByTenantAndTool(f *fixture) {
	if !f.keepsEffects() {
		return
	}
	first := f.effectRequest("refund", "one", "refund:txn_4", fingerprintA, 0)
	f.claimed(first)
	otherTool := f.effectRequest("payout", "two", "refund:txn_4", fingerprintB, 0)
	f.claimed(otherTool)
	otherTenant := f.effectRequest("refund", "three", "refund:txn_4", fingerprintB, 0)
	otherTenant.Scope.Tenant = "tenant-b"
	f.claimed(otherTenant)
}

// testEffectTakeoverOfExpiredHolder: a holder whose gateway died is taken
// over by the next call of the same action, under the holder's record (so
// its fencing token grows), as its own retry would.
func testEffectTakeoverOfExpiredHolder(f *fixture) {
	if !f.keepsEffects() {
		return
	}
	first := f.effectRequest("refund", "one", "refund:txn_5", fingerprintA, 0)
	first.LockTTL = shortLease
	old := f.claimed(first)
	time.Sleep(expireWait)
	next := f.effectRequest("refund", "two", "refund:txn_5", fingerprintA, 2)
	d := f.expect(next, idempotency.OutcomeClaimed)
	if !d.TakenOver || !d.ByEffect || d.Lease.Scope != first.Scope || d.Lease.FencingToken <= old.FencingToken {
		f.t.Fatalf("takeover by effect = %+v, want a takeover of %s with a larger token than %d", d, first.Scope, old.FencingToken)
	}
	f.expectLeaseLost(old, "the dead holder")
	f.complete(d.Lease, jsonResponse(`{"ok":true}`), replayTTL)
	if d := f.expect(f.fresh(first), idempotency.OutcomeReplay); d.ExecutionID != next.ExecutionID {
		f.t.Errorf("holder's retry replays execution %q, want %q", d.ExecutionID, next.ExecutionID)
	}
}

// testEffectConcurrentSessions: 8 sessions call one action at once, under
// 8 keys and 8 steps; exactly one claims it, round after round.
func testEffectConcurrentSessions(f *fixture) {
	if !f.keepsEffects() {
		return
	}
	const rounds, sessions = 20, 8
	for round := range rounds {
		effect := fmt.Sprintf("refund:race_%d", round)
		reqs := make([]idempotency.ClaimRequest, sessions)
		for i := range reqs {
			fp := fingerprintA
			if round%2 == 1 && i%2 == 1 {
				fp = fingerprintB // half of them with other arguments
			}
			reqs[i] = f.effectRequest("refund", fmt.Sprintf("s%d", i), effect, fp, uint64(round))
		}
		claimed := 0
		for i, d := range f.race(reqs, nil) {
			switch d.Outcome {
			case idempotency.OutcomeClaimed:
				claimed++
			case idempotency.OutcomeInProgress, idempotency.OutcomeEffectConflict:
			default:
				f.t.Errorf("round %d, session %d: outcome %v", round, i, d.Outcome)
			}
		}
		if claimed != 1 {
			f.t.Fatalf("round %d: %d of %d sessions claimed effect %s, want exactly 1", round, claimed, sessions, effect)
		}
	}
}
