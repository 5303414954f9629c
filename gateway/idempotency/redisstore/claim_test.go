package redisstore

import (
	"strconv"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

func benchRequest(i int) idempotency.ClaimRequest {
	n := strconv.Itoa(i)
	return idempotency.ClaimRequest{
		Scope:       idempotency.Scope{Tenant: "bench", Tool: "tool", Key: "key-" + n},
		Fingerprint: "fp", Step: &idempotency.Step{SessionID: "session-" + n, Index: 1}, StepGuard: true,
		ExecutionID: "exec-" + n, Owner: "owner-" + n,
		LockTTL: time.Minute, ReplayTTL: time.Hour, LeaseExpiry: idempotency.LeaseExpiryRerun,
	}
}

var benchResponse = idempotency.StoredResponse{Status: 200, ContentType: "application/json", Body: []byte(`{"result":"ok","size":1024}`)}

// BenchmarkClaimComplete is a fresh call: claim, then record the outcome.
func BenchmarkClaimComplete(b *testing.B) {
	client := testClient(b)
	store := New(client, Options{Prefix: uniquePrefix(b, client)})
	ctx := b.Context()
	i := 0
	for b.Loop() {
		d, err := store.Claim(ctx, benchRequest(i))
		if err != nil || d.Outcome != idempotency.OutcomeClaimed {
			b.Fatalf("claim: %v %v", d.Outcome, err)
		}
		if err := store.Complete(ctx, d.Lease, benchResponse, time.Hour); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkReplay is a retry of a completed call.
func BenchmarkReplay(b *testing.B) {
	client := testClient(b)
	store := New(client, Options{Prefix: uniquePrefix(b, client)})
	ctx := b.Context()
	req := benchRequest(0)
	d, err := store.Claim(ctx, req)
	if err != nil {
		b.Fatal(err)
	}
	if err := store.Complete(ctx, d.Lease, benchResponse, time.Hour); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		d, err := store.Claim(ctx, req)
		if err != nil || d.Outcome != idempotency.OutcomeReplay {
			b.Fatalf("replay: %v %v", d.Outcome, err)
		}
	}
}

// BenchmarkClaimBudget is BenchmarkClaimComplete without and with one
// budget charge (a calendar window, whose running total the script
// reads): the charge runs in the claim's pipeline, so it adds script
// time, not a round trip.
func BenchmarkClaimBudget(b *testing.B) {
	for _, charged := range []bool{false, true} {
		b.Run(map[bool]string{false: "none", true: "one-budget"}[charged], func(b *testing.B) {
			client := testClient(b)
			store := New(client, Options{Prefix: uniquePrefix(b, client)})
			ctx := b.Context()
			i := 0
			for b.Loop() {
				req := benchRequest(i)
				if charged {
					now := time.Now()
					req.Charges = []idempotency.Charge{{Bucket: "bench|t:bench|w:day", Budget: "bench", Limit: 1 << 50, Cost: 1_000_000,
						At: now, Since: now.Add(-time.Hour), Retain: 48 * time.Hour}}
				}
				d, err := store.Claim(ctx, req)
				if err != nil || d.Outcome != idempotency.OutcomeClaimed {
					b.Fatalf("claim: %v %v", d.Outcome, err)
				}
				if err := store.Complete(ctx, d.Lease, benchResponse, time.Hour); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
