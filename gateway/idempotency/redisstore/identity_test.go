package redisstore

import (
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/storetest"
)

// fingerprintIdentity is the identity the call path records for a call
// keyed on its person (callpath.recordIdentity): a person signed in at an
// OpenID provider whose subjects are UUIDs, a 24 h window: 156 bytes.
const fingerprintIdentity = `{"kind":"fingerprint","principal":"host-user:idp.example.com:5f0c7c9e-3b7a-4c1e-9d2a-8e6f4b1a2c3d","window_start":"2026-12-07T00:00:00Z","window":"24h0m0s"}`

// TestIdentityFootprint measures what keeping an identity costs a
// completed call's record (MEMORY USAGE, docs/idempotency.md): the
// reference call completed without an identity and with a fingerprint
// identity. The record grows by the identity's bytes rounded up to the
// allocator's next size class; a call without an identity pays the
// field's two length bytes.
func TestIdentityFootprint(t *testing.T) {
	client := testClient(t)
	s := New(client, Options{Prefix: "gw" + uniquePrefix(t, client)[len("gwtest:"):][:4] + ":"})
	t.Cleanup(func() { deletePrefix(t, client, s.keys.prefix) })
	ctx := t.Context()
	usage := func(i int, identity string) int64 {
		req := storetest.ReferenceCall(i)
		req.Identity = identity
		d, err := s.Claim(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Complete(ctx, d.Lease, idempotency.StoredResponse{Status: 200, ContentType: "application/json", Body: storetest.ReferenceBody}, time.Hour); err != nil {
			t.Fatal(err)
		}
		rec, err := s.Get(ctx, req.Scope)
		if err != nil || rec.Identity != identity {
			t.Fatalf("record: %v, identity %q, want %q", err, rec.Identity, identity)
		}
		return client.MemoryUsage(ctx, s.keys.record(req.Scope, s.keys.slotStep(req))).Val()
	}
	without, with := usage(1, ""), usage(2, fingerprintIdentity)
	t.Logf("completed record: %d bytes without an identity, %d with a %d-byte fingerprint identity (+%d)",
		without, with, len(fingerprintIdentity), with-without)
	// The value is one allocation: the identity adds its bytes, and at
	// most one size class (64 bytes apart at this size) of rounding.
	if added := with - without; added < int64(len(fingerprintIdentity)) || added > int64(len(fingerprintIdentity))+64 {
		t.Errorf("the identity adds %d bytes, want between %d and %d", added, len(fingerprintIdentity), len(fingerprintIdentity)+64)
	}
}
