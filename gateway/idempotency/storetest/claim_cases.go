package storetest

import (
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

func claimCases() []testCase {
	return []testCase{
		{"FirstClaim", testFirstClaim},
		{"ReplayByteForByte", testReplayByteForByte},
		{"InProgressRetryAfter", testInProgressRetryAfter},
		{"KeyReusedInEveryState", testKeyReusedInEveryState},
		{"ResentClaimGetsItsClaim", testResentClaimGetsItsClaim},
		{"Ping", testPing},
		{"InvalidClaimRefused", testInvalidClaimRefused},
	}
}

// testInvalidClaimRefused: every store refuses the same malformed claims
// (ClaimRequest.Validate) and writes nothing for them.
func testInvalidClaimRefused(f *fixture) {
	base := f.request(f.scope("tool", f.id("key")), fingerprintA, nil)
	bad := map[string]func(r *idempotency.ClaimRequest){
		"unknown lease expiry": func(r *idempotency.ClaimRequest) { r.LeaseExpiry = "never" },
		"zero lock ttl":        func(r *idempotency.ClaimRequest) { r.LockTTL = 0 },
		"zero replay ttl":      func(r *idempotency.ClaimRequest) { r.ReplayTTL = 0 },
		"no owner":             func(r *idempotency.ClaimRequest) { r.Owner = "" },
	}
	for name, spoil := range bad {
		req := base
		spoil(&req)
		if _, err := f.store.Claim(f.ctx, req); err == nil {
			f.t.Errorf("%s: claim accepted", name)
		}
	}
	// Nothing was written: the well-formed claim is the first.
	f.expect(base, idempotency.OutcomeClaimed)
}

func testFirstClaim(f *fixture) {
	for _, step := range []*idempotency.Step{nil, f.step("first", 0)} {
		req := f.request(f.scope("tool", f.id("key")), fingerprintA, step)
		d := f.expect(req, idempotency.OutcomeClaimed)
		if d.TakenOver || d.Response != nil || d.Conflict != nil || d.RetryAfter != 0 {
			f.t.Errorf("first claim (step %v) carries extra fields: %+v", step, d)
		}
		f.checkLease(req, d)
	}
}

func testReplayByteForByte(f *fixture) {
	everyByte := make([]byte, 256)
	for i := range everyByte {
		everyByte[i] = byte(i)
	}
	responses := []idempotency.StoredResponse{
		{Status: 201, ContentType: "application/json; charset=utf-8", Body: []byte("{\"id\": \"x\",\n \"n\": 1.50}\n")},
		{Status: 409, ContentType: "application/problem+json", Body: []byte(`{"title":"conflict"}`)},
		{Status: 200, ContentType: "application/octet-stream", Body: everyByte},
		{Status: 204, ContentType: "", Body: nil},
	}
	for i, resp := range responses {
		var step *idempotency.Step
		if i%2 == 1 {
			step = f.step("replay", uint64(i))
		}
		req := f.request(f.scope("tool", f.id("key")), fingerprintA, step)
		lease := f.claimed(req)
		f.complete(lease, resp, replayTTL)
		for range 2 { // a replay does not consume the record
			d := f.expect(f.fresh(req), idempotency.OutcomeReplay)
			if !sameResponse(d.Response, resp) {
				f.t.Errorf("response %d: replay = %+v, want %+v", i, d.Response, resp)
			}
			if d.ExecutionID != req.ExecutionID {
				f.t.Errorf("response %d: replay execution id = %q, want the original %q", i, d.ExecutionID, req.ExecutionID)
			}
		}
	}
}

func testInProgressRetryAfter(f *fixture) {
	const lease = time.Second
	const pause = 300 * time.Millisecond
	req := f.request(f.scope("tool", f.id("key")), fingerprintA, nil)
	req.LockTTL = lease
	beforeFirst := time.Now()
	f.claimed(req)
	afterFirst := time.Now()
	time.Sleep(pause)

	beforeSecond := time.Now()
	d := f.expect(f.fresh(req), idempotency.OutcomeInProgress)
	afterSecond := time.Now()
	if d.ExecutionID != req.ExecutionID {
		f.t.Errorf("in-progress execution id = %q, want %q", d.ExecutionID, req.ExecutionID)
	}
	// The lease ends between beforeFirst+lease and afterFirst+lease; the
	// store looked at its clock between beforeSecond and afterSecond.
	most := lease - beforeSecond.Sub(afterFirst) + timeSlack
	least := lease - afterSecond.Sub(beforeFirst) - timeSlack
	if d.RetryAfter <= 0 || d.RetryAfter > most || d.RetryAfter < least {
		f.t.Errorf("RetryAfter = %v, want the remaining lease, in [%v, %v]", d.RetryAfter, least, most)
	}
}

func testKeyReusedInEveryState(f *fixture) {
	newReq := func(expiry idempotency.LeaseExpiry, lease time.Duration) idempotency.ClaimRequest {
		req := f.request(f.scope("tool", f.id("key")), fingerprintA, f.step(f.id("s"), 1))
		req.LeaseExpiry = expiry
		req.LockTTL = lease
		return req
	}
	other := func(req idempotency.ClaimRequest) idempotency.ClaimRequest {
		req = f.fresh(req)
		req.Fingerprint = fingerprintB
		return req
	}
	alive := newReq(idempotency.LeaseExpiryRerun, longLease)
	completed := newReq(idempotency.LeaseExpiryRerun, longLease)
	expired := newReq(idempotency.LeaseExpiryRerun, shortLease)
	unknown := newReq(idempotency.LeaseExpiryUnknown, shortLease)
	f.claimed(alive)
	f.complete(f.claimed(completed), jsonResponse(`{"ok":true}`), replayTTL)
	f.claimed(expired)
	f.claimed(unknown)
	time.Sleep(expireWait)
	f.expect(f.fresh(unknown), idempotency.OutcomeUnknown)

	for name, req := range map[string]idempotency.ClaimRequest{
		"IN_PROGRESS": alive, "COMPLETED": completed, "IN_PROGRESS expired": expired, "UNKNOWN": unknown,
	} {
		d := f.claim(other(req))
		if d.Outcome != idempotency.OutcomeKeyReused {
			f.t.Errorf("%s: claim with another fingerprint = %v, want key_reused", name, d.Outcome)
		}
		rec := f.get(req.Scope)
		if rec.Fingerprint != fingerprintA || rec.ExecutionID != req.ExecutionID {
			f.t.Errorf("%s: key_reused changed the record: %+v", name, rec)
		}
	}
	// The refused request did not take the expired record over; the right
	// fingerprint still can.
	d := f.expect(f.fresh(expired), idempotency.OutcomeClaimed)
	if !d.TakenOver {
		f.t.Errorf("claim of an expired lease: TakenOver = false")
	}
}

func testPing(f *fixture) {
	if err := f.store.Ping(f.ctx); err != nil {
		f.t.Errorf("Ping: %v", err)
	}
}

// testResentClaimGetsItsClaim: a client that lost the answer to its claim
// and sends the very same claim (same owner token) again gets the claim it
// already holds — not "in progress", which would orphan the record.
func testResentClaimGetsItsClaim(f *fixture) {
	req := f.request(f.scope("tool", f.id("key")), fingerprintA, f.step(f.id("resent"), 1))
	first := f.expect(req, idempotency.OutcomeClaimed)
	again := f.expect(req, idempotency.OutcomeClaimed)
	if again.Lease.Owner != first.Lease.Owner || again.Lease.FencingToken != first.Lease.FencingToken || again.ExecutionID != first.ExecutionID {
		f.t.Errorf("resent claim: %+v, want the first claim's lease %+v", again.Lease, first.Lease)
	}
	f.complete(again.Lease, idempotency.StoredResponse{Status: 200, Body: []byte("{}")}, replayTTL)
	other := f.fresh(req)
	if d := f.expect(other, idempotency.OutcomeReplay); d.ExecutionID != first.ExecutionID {
		f.t.Errorf("replay after the resent claim completed: execution id %s, want %s", d.ExecutionID, first.ExecutionID)
	}
}
