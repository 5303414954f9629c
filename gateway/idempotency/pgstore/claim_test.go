package pgstore

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

func benchRequest(i int) idempotency.ClaimRequest {
	n := strconv.Itoa(i)
	return idempotency.ClaimRequest{
		Scope:       idempotency.Scope{Tenant: "bench", Tool: "tool", Key: "key-" + n},
		Fingerprint: "fp", Step: &idempotency.Step{SessionID: "session-" + n, Index: 1}, StepGuard: true, StepBoundKey: true,
		ExecutionID: "exec-" + n, Owner: "owner-" + n,
		LockTTL: time.Minute, ReplayTTL: time.Hour, LeaseExpiry: idempotency.LeaseExpiryRerun,
	}
}

var benchResponse = idempotency.StoredResponse{Status: 200, ContentType: "application/json", Body: []byte(`{"result":"ok","size":1024}`)}

// BenchmarkClaimComplete is a fresh call: claim, then record the outcome
// (two commits, each a WAL flush).
func BenchmarkClaimComplete(b *testing.B) {
	store, _ := newTestStore(b, Options{})
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
	store, _ := newTestStore(b, Options{})
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

// BenchmarkPollInProgress is one poll of a Prefer: wait request: a claim
// by another owner that finds the call still running.
func BenchmarkPollInProgress(b *testing.B) {
	store, _ := newTestStore(b, Options{})
	ctx := b.Context()
	req := benchRequest(0)
	if _, err := store.Claim(ctx, req); err != nil {
		b.Fatal(err)
	}
	poll := req
	poll.Owner, poll.ExecutionID = "waiter", "exec-waiter"
	for b.Loop() {
		d, err := store.Claim(ctx, poll)
		if err != nil || d.Outcome != idempotency.OutcomeInProgress {
			b.Fatalf("poll: %v %v", d.Outcome, err)
		}
	}
}

// BenchmarkCommitNotify measures what LISTEN/NOTIFY would add to every
// completion, the alternative to polling for Prefer: wait: concurrent
// single-row commits, as completions are, with and without a pg_notify in
// the same statement. NOTIFY takes a cluster-wide lock while its
// transaction commits, so notifying commits are serialised, WAL flush
// included, whereas plain commits share flushes. (Polling instead costs one
// read-only claim per poll: BenchmarkPollInProgress.)
func BenchmarkCommitNotify(b *testing.B) {
	for _, notify := range []bool{false, true} {
		name := "plain"
		if notify {
			name = "notify"
		}
		b.Run(name, func(b *testing.B) {
			s, pool := newTestStore(b, Options{})
			q := qualifier(s.schema)
			if _, err := pool.Exec(b.Context(), q(`CREATE TABLE @.bench (id bigint PRIMARY KEY, n bigint NOT NULL DEFAULT 0)`)); err != nil {
				b.Fatal(err)
			}
			if _, err := pool.Exec(b.Context(), q(`INSERT INTO @.bench (id) SELECT generate_series(0, 1023)`)); err != nil {
				b.Fatal(err)
			}
			update := q(`UPDATE @.bench SET n = n + 1 WHERE id = $1`)
			if notify {
				update = q(`WITH u AS (UPDATE @.bench SET n = n + 1 WHERE id = $1 RETURNING id)
					SELECT pg_notify('gwbench', id::text) FROM u`)
			}
			var next atomic.Int64
			b.SetParallelism(8) // 16 goroutines sharing the pool: concurrent commits
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					id := next.Add(1) % 1024
					rows, err := pool.Query(b.Context(), update, id)
					if err != nil {
						b.Error(err)
						return
					}
					rows.Close()
					if err := rows.Err(); err != nil {
						b.Error(strconv.Quote(err.Error()))
						return
					}
				}
			})
		})
	}
}

// BenchmarkClaimBudget is BenchmarkClaimComplete without and with one
// budget charge: charge() runs in the claim's own statement, so it adds
// work inside it, not a round trip.
func BenchmarkClaimBudget(b *testing.B) {
	for _, charged := range []bool{false, true} {
		b.Run(map[bool]string{false: "none", true: "one-budget"}[charged], func(b *testing.B) {
			store, _ := newTestStore(b, Options{})
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
