package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// Lease lengths. A "long" lease never expires during a case; a "short" one
// is waited out with expireWait, which leaves a wide margin for a loaded
// machine.
const (
	longLease  = 30 * time.Second
	shortLease = 150 * time.Millisecond
	expireWait = 350 * time.Millisecond
	replayTTL  = time.Minute
	// timeSlack absorbs millisecond rounding in a store's lease arithmetic.
	timeSlack = 20 * time.Millisecond
	// clockSlack absorbs the difference between the test's clock and the
	// store's (the Redis server's) clock when comparing absolute times.
	clockSlack = 2 * time.Second
)

const (
	fingerprintA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	fingerprintB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// fixture holds one subtest's store and mints unique ids for it.
type fixture struct {
	t     *testing.T
	ctx   context.Context
	store idempotency.Store
	run   string // random per fixture, so ids never repeat across stores
	seq   atomic.Int64
}

func newFixture(t *testing.T, store idempotency.Store) *fixture {
	var random [6]byte
	if _, err := rand.Read(random[:]); err != nil {
		t.Fatalf("random: %v", err)
	}
	return &fixture{t: t, ctx: t.Context(), store: store, run: hex.EncodeToString(random[:])}
}

func (f *fixture) id(kind string) string {
	return fmt.Sprintf("%s-%s-%d", kind, f.run, f.seq.Add(1))
}

// scope names a record of tenant "tenant-a"; keys carry characters that a
// careless key layout would mistake for separators or hash tags.
func (f *fixture) scope(tool, key string) idempotency.Scope {
	return idempotency.Scope{Tenant: "tenant-a", Tool: tool, Key: "k{" + key + "}:x"}
}

// step names a step of a session whose id also carries such characters.
func (f *fixture) step(session string, index uint64) *idempotency.Step {
	return &idempotency.Step{SessionID: "sess{" + session + "}", Index: index}
}

// request is a claim with fresh owner and execution id, a long lease and
// the rerun policy; cases adjust the fields they are about.
func (f *fixture) request(scope idempotency.Scope, fingerprint string, step *idempotency.Step) idempotency.ClaimRequest {
	return idempotency.ClaimRequest{
		Scope:       scope,
		Fingerprint: fingerprint,
		Step:        step,
		StepGuard:   step != nil,
		// As in derived mode, so sharded stores keep the step guard.
		StepBoundKey: step != nil,
		ExecutionID:  f.id("exec"),
		Owner:        f.id("owner"),
		LockTTL:      longLease,
		ReplayTTL:    replayTTL,
		LeaseExpiry:  idempotency.LeaseExpiryRerun,
	}
}

// fresh returns req with a new owner and execution id, as a second request
// carrying the same key would have.
func (f *fixture) fresh(req idempotency.ClaimRequest) idempotency.ClaimRequest {
	req.ExecutionID = f.id("exec")
	req.Owner = f.id("owner")
	return req
}

func (f *fixture) claim(req idempotency.ClaimRequest) idempotency.Decision {
	f.t.Helper()
	d, err := f.store.Claim(f.ctx, req)
	if err != nil {
		f.t.Fatalf("Claim(%s/%s): %v", req.Scope.Tool, req.Scope.Key, err)
	}
	return d
}

// expect claims and fails unless the outcome is want.
func (f *fixture) expect(req idempotency.ClaimRequest, want idempotency.Outcome) idempotency.Decision {
	f.t.Helper()
	d := f.claim(req)
	if d.Outcome != want {
		f.t.Fatalf("Claim(%s/%s) outcome = %v, want %v (decision %+v)", req.Scope.Tool, req.Scope.Key, d.Outcome, want, d)
	}
	return d
}

// claimed claims, requires a first claim (not a takeover) by req's owner,
// and returns the lease.
func (f *fixture) claimed(req idempotency.ClaimRequest) idempotency.Lease {
	f.t.Helper()
	d := f.expect(req, idempotency.OutcomeClaimed)
	if d.TakenOver {
		f.t.Fatalf("first claim of %s reports TakenOver", req.Scope.Key)
	}
	f.checkLease(req, d)
	return d.Lease
}

// checkLease verifies that a Claimed decision hands out req's identity.
func (f *fixture) checkLease(req idempotency.ClaimRequest, d idempotency.Decision) {
	f.t.Helper()
	l := d.Lease
	if l.Scope != req.Scope || l.Owner != req.Owner || l.ExecutionID != req.ExecutionID || d.ExecutionID != req.ExecutionID {
		f.t.Fatalf("lease = %+v (decision execution id %q), want scope %+v owner %q execution id %q",
			l, d.ExecutionID, req.Scope, req.Owner, req.ExecutionID)
	}
	if l.FencingToken <= 0 {
		f.t.Fatalf("fencing token = %d, want > 0", l.FencingToken)
	}
	if (l.Step == nil) != (req.Step == nil) || (l.Step != nil && *l.Step != *req.Step) {
		f.t.Fatalf("lease step = %+v, want %+v", l.Step, req.Step)
	}
}

func (f *fixture) complete(lease idempotency.Lease, resp idempotency.StoredResponse, ttl time.Duration) {
	f.t.Helper()
	if err := f.store.Complete(f.ctx, lease, resp, ttl); err != nil {
		f.t.Fatalf("Complete(%s): %v", lease.Scope.Key, err)
	}
}

func (f *fixture) markUnknown(lease idempotency.Lease, ttl time.Duration) {
	f.t.Helper()
	if err := f.store.MarkUnknown(f.ctx, lease, ttl); err != nil {
		f.t.Fatalf("MarkUnknown: %v", err)
	}
}

func (f *fixture) release(lease idempotency.Lease) {
	f.t.Helper()
	if err := f.store.Release(f.ctx, lease); err != nil {
		f.t.Fatalf("Release(%s): %v", lease.Scope.Key, err)
	}
}

func (f *fixture) delete(scope idempotency.Scope) {
	f.t.Helper()
	if err := f.store.Delete(f.ctx, scope); err != nil {
		f.t.Fatalf("Delete(%s): %v", scope.Key, err)
	}
}

func (f *fixture) get(scope idempotency.Scope) idempotency.Record {
	f.t.Helper()
	rec, err := f.store.Get(f.ctx, scope)
	if err != nil {
		f.t.Fatalf("Get(%s): %v", scope.Key, err)
	}
	return rec
}

func (f *fixture) expectNotFound(scope idempotency.Scope) {
	f.t.Helper()
	rec, err := f.store.Get(f.ctx, scope)
	if !errors.Is(err, idempotency.ErrNotFound) {
		f.t.Fatalf("Get(%s) = %+v, %v; want ErrNotFound", scope.Key, rec, err)
	}
}

// expectLeaseLost checks that every owner operation with lease fails with
// ErrLeaseLost.
func (f *fixture) expectLeaseLost(lease idempotency.Lease, what string) {
	f.t.Helper()
	if err := f.store.Renew(f.ctx, lease, longLease); !errors.Is(err, idempotency.ErrLeaseLost) {
		f.t.Errorf("%s: Renew = %v, want ErrLeaseLost", what, err)
	}
	resp := idempotency.StoredResponse{Status: 299, ContentType: "text/plain", Body: []byte("must not be stored")}
	if err := f.store.Complete(f.ctx, lease, resp, replayTTL); !errors.Is(err, idempotency.ErrLeaseLost) {
		f.t.Errorf("%s: Complete = %v, want ErrLeaseLost", what, err)
	}
	if err := f.store.MarkUnknown(f.ctx, lease, replayTTL); !errors.Is(err, idempotency.ErrLeaseLost) {
		f.t.Errorf("%s: MarkUnknown = %v, want ErrLeaseLost", what, err)
	}
	if err := f.store.Release(f.ctx, lease); !errors.Is(err, idempotency.ErrLeaseLost) {
		f.t.Errorf("%s: Release = %v, want ErrLeaseLost", what, err)
	}
}

func sameResponse(got *idempotency.StoredResponse, want idempotency.StoredResponse) bool {
	return got != nil && got.Status == want.Status && got.ContentType == want.ContentType && bytes.Equal(got.Body, want.Body)
}

func jsonResponse(body string) idempotency.StoredResponse {
	return idempotency.StoredResponse{Status: 200, ContentType: "application/json", Body: []byte(body)}
}

// within reports whether got lies in [want-slack, want+slack].
func within(got, want time.Time, slack time.Duration) bool {
	return !got.Before(want.Add(-slack)) && !got.After(want.Add(slack))
}
