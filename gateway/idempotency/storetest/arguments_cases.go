package storetest

import (
	"bytes"
	"errors"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// canonicalArgs are a call's canonical arguments (JCS), with a character
// a careless store would mangle.
var canonicalArgs = []byte(`{"amount":120,"note":"caf\u00e9 ✓","to":"acct-9"}`)

// argumentsCases pin the operator context of records: the step and the
// canonical arguments, kept while the record is IN_PROGRESS or UNKNOWN
// (so an operator can check the effect) and dropped once COMPLETED,
// unless the lease asks to keep them (Lease.KeepArguments, for policy
// replay).
func argumentsCases() []testCase {
	return []testCase{
		{"ArgumentsKeptWhileOpen", testArgumentsKeptWhileOpen},
		{"ArgumentsKeptThroughTakeoverAndExpiry", testArgumentsThroughExpiry},
		{"ArgumentsDroppedOnResolve", testArgumentsDroppedOnResolve},
		{"ArgumentsKeptOnCompletionWhenAsked", testArgumentsKeptOnCompletion},
	}
}

func (f *fixture) expectArguments(scope idempotency.Scope, want []byte, when string) idempotency.Record {
	f.t.Helper()
	rec := f.get(scope)
	if !bytes.Equal(rec.CanonicalArguments, want) {
		f.t.Errorf("%s: CanonicalArguments = %q, want %q", when, rec.CanonicalArguments, want)
	}
	return rec
}

func testArgumentsKeptWhileOpen(f *fixture) {
	step := f.step("arguments", 41)
	req := f.request(f.scope("pay", "key"), fingerprintA, step)
	req.CanonicalArguments = canonicalArgs
	lease := f.claimed(req)
	rec := f.expectArguments(req.Scope, canonicalArgs, "IN_PROGRESS")
	if rec.Step == nil || *rec.Step != *step {
		f.t.Errorf("record step = %+v, want %+v", rec.Step, *step)
	}
	if err := f.store.Renew(f.ctx, lease, longLease); err != nil {
		f.t.Fatalf("Renew: %v", err)
	}
	f.expectArguments(req.Scope, canonicalArgs, "after Renew")
	if admin, ok := f.store.(idempotency.Admin); ok {
		found, err := admin.FindExecution(f.ctx, req.ExecutionID)
		if err != nil || !bytes.Equal(found.CanonicalArguments, canonicalArgs) {
			f.t.Errorf("FindExecution = %q, %v; want the arguments", found.CanonicalArguments, err)
		}
		f.expectListedWithoutArguments(req.Scope)
	}
	f.markUnknown(lease, replayTTL)
	f.expectArguments(req.Scope, canonicalArgs, "UNKNOWN by its owner")

	// COMPLETED drops them; a call without arguments stores none.
	done := f.request(f.scope("pay", "done"), fingerprintA, f.step("arguments", 42))
	done.CanonicalArguments = canonicalArgs
	lease = f.claimed(done)
	f.complete(lease, jsonResponse(`{"ok":true}`), replayTTL)
	f.expectArguments(done.Scope, nil, "COMPLETED")
	bare := f.request(f.scope("pay", "bare"), fingerprintA, nil)
	f.claimed(bare)
	if rec := f.expectArguments(bare.Scope, nil, "a claim without arguments"); rec.Step != nil {
		f.t.Errorf("record of a call without a step has step %+v", rec.Step)
	}
}

func testArgumentsThroughExpiry(f *fixture) {
	// A takeover keeps the arguments (same fingerprint, same arguments).
	req := f.request(f.scope("tool", "rerun"), fingerprintA, f.step("arguments-expiry", 1))
	req.CanonicalArguments = canonicalArgs
	req.LockTTL = shortLease
	f.claimed(req)
	time.Sleep(expireWait)
	again := f.fresh(req)
	if d := f.expect(again, idempotency.OutcomeClaimed); !d.TakenOver {
		f.t.Errorf("claim after expiry did not take over")
	}
	f.expectArguments(req.Scope, canonicalArgs, "after a takeover")

	// An expired lease turned UNKNOWN by the next claim keeps them.
	unknown := f.request(f.scope("pay", "expired"), fingerprintA, f.step("arguments-expiry", 2))
	unknown.CanonicalArguments = canonicalArgs
	f.expireIntoUnknown(unknown)
	f.expectArguments(unknown.Scope, canonicalArgs, "UNKNOWN after lease expiry")
}

func testArgumentsDroppedOnResolve(f *fixture) {
	admin, ok := f.store.(idempotency.Admin)
	if !ok {
		f.t.Skip("not an Admin")
	}
	req := f.request(f.scope("pay", "resolve"), fingerprintA, f.step("arguments-resolve", 1))
	req.CanonicalArguments = canonicalArgs
	lease := f.claimed(req)
	f.markUnknown(lease, replayTTL)
	rec, err := admin.Resolve(f.ctx, req.Scope, jsonResponse(`{"found":"paid"}`), replayTTL)
	if err != nil {
		f.t.Fatalf("Resolve: %v", err)
	}
	if rec.CanonicalArguments != nil {
		f.t.Errorf("Resolve returned arguments %q", rec.CanonicalArguments)
	}
	f.expectArguments(req.Scope, nil, "resolved")
}

// testArgumentsKeptOnCompletion: a lease with KeepArguments completes into
// a record that keeps its arguments (Get, FindExecution; not List) and
// still replays its response; they go with the record, deleted or
// expired, and a later record of the same key completed without the
// setting has none.
func testArgumentsKeptOnCompletion(f *fixture) {
	req := f.request(f.scope("pay", "kept"), fingerprintA, f.step("arguments-kept", 1))
	req.CanonicalArguments = canonicalArgs
	lease := f.claimed(req)
	lease.KeepArguments = true
	f.complete(lease, jsonResponse(`{"ok":true}`), replayTTL)
	rec := f.expectArguments(req.Scope, canonicalArgs, "COMPLETED with KeepArguments")
	if rec.State != idempotency.StateCompleted || rec.Response == nil || string(rec.Response.Body) != `{"ok":true}` {
		f.t.Errorf("record = %s with %+v, want COMPLETED with its response", rec.State, rec.Response)
	}
	if d := f.expect(f.fresh(req), idempotency.OutcomeReplay); d.Response == nil || string(d.Response.Body) != `{"ok":true}` {
		f.t.Errorf("replay of a record that kept its arguments: %+v", d.Response)
	}
	if admin, ok := f.store.(idempotency.Admin); ok {
		found, err := admin.FindExecution(f.ctx, req.ExecutionID)
		if err != nil || !bytes.Equal(found.CanonicalArguments, canonicalArgs) {
			f.t.Errorf("FindExecution = %q, %v; want the kept arguments", found.CanonicalArguments, err)
		}
		f.expectListedWithoutArguments(req.Scope)
	}

	// Deleted with the record: the same key claimed again with other
	// arguments and completed without the setting keeps none.
	if err := f.store.Delete(f.ctx, req.Scope); err != nil {
		f.t.Fatalf("Delete: %v", err)
	}
	other := f.fresh(req)
	other.CanonicalArguments = []byte(`{"amount":7}`)
	lease = f.claimed(other)
	f.expectArguments(req.Scope, other.CanonicalArguments, "IN_PROGRESS after delete")
	f.complete(lease, jsonResponse(`{"ok":2}`), replayTTL)
	f.expectArguments(req.Scope, nil, "COMPLETED without KeepArguments after a delete")

	// Expired with the record: a short-lived completion, then the key
	// again, completed without the setting.
	short := f.request(f.scope("pay", "kept-short"), fingerprintA, f.step("arguments-kept", 2))
	short.CanonicalArguments = canonicalArgs
	lease = f.claimed(short)
	lease.KeepArguments = true
	f.complete(lease, jsonResponse(`{"ok":true}`), shortLease)
	f.expectArguments(short.Scope, canonicalArgs, "short-lived COMPLETED")
	time.Sleep(expireWait)
	if _, err := f.store.Get(f.ctx, short.Scope); !errors.Is(err, idempotency.ErrNotFound) {
		f.t.Fatalf("Get after the record's TTL: %v, want ErrNotFound", err)
	}
	again := f.fresh(short)
	again.CanonicalArguments = nil
	lease = f.claimed(again)
	f.complete(lease, jsonResponse(`{"ok":3}`), replayTTL)
	f.expectArguments(short.Scope, nil, "COMPLETED without KeepArguments after expiry")
}

// expectListedWithoutArguments lists scope's tenant and tool through
// every page and requires scope among the records, none of them carrying
// arguments. It follows the cursor: a page is bounded work and may hold
// none of the records and still have a cursor (on Redis Cluster, a page's
// SCAN rounds can end on the first masters, before the one holding scope,
// when the suite's parallel cases fill the keyspace).
func (f *fixture) expectListedWithoutArguments(scope idempotency.Scope) {
	f.t.Helper()
	listed := false
	for _, r := range f.listAll(idempotency.ListFilter{Tenant: scope.Tenant, Tool: scope.Tool, Limit: 10}) {
		listed = listed || r.Scope == scope
		if r.CanonicalArguments != nil {
			f.t.Errorf("List carries arguments: %q", r.CanonicalArguments)
		}
	}
	if !listed {
		f.t.Errorf("List of %s/%s does not return %s", scope.Tenant, scope.Tool, scope)
	}
}
