package storetest

import (
	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

func identityCases() []testCase {
	return []testCase{
		{"IdentityKeptForTheRecordsLife", testIdentityKept},
	}
}

// testIdentityKept: a store that keeps identities (IdentityKeeper) shows
// the claim's identity on the record while IN_PROGRESS, once COMPLETED,
// in Admin.List and FindExecution, unchanged by a replaying claim that
// carries another; a claim without one leaves the record without. A
// store that keeps none shows none.
func testIdentityKept(f *fixture) {
	keeper, _ := f.store.(idempotency.IdentityKeeper)
	keeps := keeper != nil && keeper.KeepsIdentity()
	want := func(s string) string {
		if keeps {
			return s
		}
		return ""
	}
	const identity = `{"kind":"fingerprint","principal":"host-user:op.example:ada","window_start":"2026-12-07T00:00:00Z","window":"24h0m0s"}`
	req := f.request(f.scope("tool", f.id("key")), fingerprintA, &idempotency.Step{SessionID: "fp:host-user:op.example:ada"})
	req.StepGuard = false
	req.Identity = identity
	lease := f.claimed(req)
	if got := f.get(req.Scope).Identity; got != want(identity) {
		f.t.Errorf("IN_PROGRESS identity = %q, want %q", got, want(identity))
	}
	f.complete(lease, jsonResponse(`{"ok":true}`), replayTTL)
	again := f.fresh(req)
	again.Identity = `{"kind":"host","host_meta":"x","host_call_id":"y"}`
	f.expect(again, idempotency.OutcomeReplay)
	if got := f.get(req.Scope).Identity; got != want(identity) {
		f.t.Errorf("COMPLETED identity after a replay = %q, want %q", got, want(identity))
	}
	found, err := f.admin().FindExecution(f.ctx, req.ExecutionID)
	if err != nil || found.Identity != want(identity) {
		f.t.Errorf("FindExecution: %v, identity %q, want %q", err, found.Identity, want(identity))
	}
	listed := f.listAll(idempotency.ListFilter{Tenant: req.Scope.Tenant, Tool: req.Scope.Tool, Limit: 10})
	if len(listed) != 1 || listed[0].Identity != want(identity) {
		f.t.Errorf("List: %d records, identity %q; want 1 with %q", len(listed), firstIdentity(listed), want(identity))
	}

	plain := f.request(f.scope("tool", f.id("key")), fingerprintA, nil)
	f.claimed(plain)
	if got := f.get(plain.Scope).Identity; got != "" {
		f.t.Errorf("a claim without identity: record identity %q, want none", got)
	}
}

func firstIdentity(recs []idempotency.Record) string {
	if len(recs) == 0 {
		return ""
	}
	return recs[0].Identity
}
