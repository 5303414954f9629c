package redisstore

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/internal/redistest"
)

// refundClaim is a claim of key charging cost (in units) to one calendar
// bucket of 100.
func refundClaim(key string, cost int64) idempotency.ClaimRequest {
	now := time.Now()
	return idempotency.ClaimRequest{
		Scope:       idempotency.Scope{Tenant: "acme", Tool: "refund", Key: key},
		Fingerprint: "fp-" + key, ExecutionID: "exec-" + key + "-" + strconv.FormatInt(now.UnixNano(), 10), Owner: "owner-" + key + "-" + strconv.FormatInt(now.UnixNano(), 10),
		LockTTL: 300 * time.Millisecond, ReplayTTL: time.Hour, LeaseExpiry: idempotency.LeaseExpiryRerun,
		Charges: []idempotency.Charge{{Bucket: "refunds|t:acme|w:day", Budget: "refunds", Limit: 100, Cost: cost,
			At: now, Since: now.Add(-time.Hour), Retain: 48 * time.Hour}},
	}
}

// reservedInRefunds is what refundClaim's bucket counts.
func reservedInRefunds(t *testing.T, s *Store) int64 {
	t.Helper()
	u, err := s.BudgetUsage(t.Context(), "refunds|t:acme|w:day", time.Time{}, false)
	if err != nil {
		t.Fatal(err)
	}
	return u.Reserved
}

// TestBudgetCrashBetweenStepsOnCluster injects a crash between the steps
// of a reservation on a real three-master Redis Cluster (the bucket and
// the record in different slots) and counts what the bucket lets through:
// never more than its limit of 100.
//
//   - Dead after the claim and its intent, before reserving: the record is
//     claimed, nothing reserved, nothing ran. Another call of 50 reserves;
//     once the dead lease expires, the call's retry takes it over and
//     reserves its 60 then — refused (50 + 60 > 100), its claim given back.
//   - Dead in a release, after deleting the record, before dropping its
//     entry: the 50 stays counted (a call of 60 is refused) until
//     SweepBudgets drops it; then the 60 reserves.
//   - A record that completed keeps its entry through the sweep.
func TestBudgetCrashBetweenStepsOnCluster(t *testing.T) {
	cluster := redistest.StartCluster(t, 3)
	client := cluster.Client()
	t.Cleanup(func() { _ = client.Close() })
	s := New(client, Options{Prefix: redistest.Prefix("budcrash"), EffectSweepInterval: -1})
	ctx := context.Background()
	bucket := s.keys.budgetHead() + "refunds|t:acme|w:day}"
	for _, key := range []string{"a", "b", "c"} {
		rec := s.keys.record(refundClaim(key, 0).Scope, nil)
		if client.ClusterKeySlot(ctx, bucket).Val() == client.ClusterKeySlot(ctx, rec).Val() {
			t.Fatalf("the bucket shares record %s's slot: the test proves nothing", key)
		}
	}
	reserved := func() int64 { t.Helper(); return reservedInRefunds(t, s) }

	// Crash after step 1.
	crashed := refundClaim("a", 60)
	c, err := s.claimRecord(ctx, crashed)
	if err != nil || c.d.Outcome != idempotency.OutcomeClaimed || c.intent == nil {
		t.Fatalf("claim with intent: %+v %v", c, err)
	}
	if n := reserved(); n != 0 {
		t.Fatalf("reserved %d after the intent alone, want 0", n)
	}
	b, err := s.Claim(ctx, refundClaim("b", 50))
	if err != nil || b.Outcome != idempotency.OutcomeClaimed {
		t.Fatalf("50 while the crashed claim holds nothing: %v %v", b.Outcome, err)
	}
	time.Sleep(400 * time.Millisecond) // the crashed claim's lease ends
	retry := crashed
	retry.Owner, retry.ExecutionID = "owner-a-retry", "exec-a-retry"
	d, err := s.Claim(ctx, retry)
	if err != nil || d.Outcome != idempotency.OutcomeBudgetExceeded || d.Budget.Remaining != 50 {
		t.Fatalf("the takeover of the crashed 60: %v %+v %v, want budget_exceeded with 50 left", d.Outcome, d.Budget, err)
	}
	if n := reserved(); n != 50 {
		t.Fatalf("reserved %d, want the 50", n)
	}

	// Crash in b's release, between its two steps.
	rec := s.keys.record(b.Lease.Scope, nil)
	if _, err := s.eval(ctx, call(releaseScript, []string{rec, s.keys.charged(rec)},
		releaseArgs{ownerOf(b.Lease), s.keys.stepArgs("acme"), flag(true)})); err != nil {
		t.Fatal(err)
	}
	if d, err := s.Claim(ctx, refundClaim("c", 60)); err != nil || d.Outcome != idempotency.OutcomeBudgetExceeded {
		t.Fatalf("60 while the half-released 50 is in doubt: %v %v, want budget_exceeded", d.Outcome, err)
	}
	if n, err := s.SweepBudgets(ctx); err != nil || n != 1 {
		t.Fatalf("sweep: dropped %d, %v; want 1", n, err)
	}
	c60, err := s.Claim(ctx, refundClaim("c", 60))
	if err != nil || c60.Outcome != idempotency.OutcomeClaimed {
		t.Fatalf("60 after the sweep: %v %v", c60.Outcome, err)
	}
	if err := s.Complete(ctx, c60.Lease, idempotency.StoredResponse{Status: 200, ContentType: "application/json", Body: []byte(`{}`)}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if n, err := s.SweepBudgets(ctx); err != nil || n != 0 {
		t.Fatalf("sweep after the completion: dropped %d, %v; want none", n, err)
	}
	if n := reserved(); n != 60 {
		t.Fatalf("reserved %d, want the completed 60", n)
	}
}

// TestBudgetAddsNoRoundTrip: on a single Redis a claim that charges a
// budget costs the round trips of one that does not (budget.lua rides in
// the claim's pipeline), and so does the release of a charged claim
// (its reservation goes in release.lua).
func TestBudgetAddsNoRoundTrip(t *testing.T) {
	client := testClient(t)
	counter := &roundTrips{}
	client.AddHook(counter)
	s := New(client, Options{Prefix: uniquePrefix(t, client)})
	ctx := t.Context()
	costs := map[bool][2]int64{}
	for _, charged := range []bool{false, true, false, true} { // the first two load the scripts
		req := refundClaim("k-"+strconv.FormatBool(charged)+strconv.Itoa(len(costs)), 10)
		if !charged {
			req.Charges = nil
		}
		var d idempotency.Decision
		claim := counter.cost(t, func() (err error) { d, err = s.Claim(ctx, req); return err })
		if d.Outcome != idempotency.OutcomeClaimed {
			t.Fatalf("claim: %v", d.Outcome)
		}
		release := counter.cost(t, func() error { return s.Release(ctx, d.Lease) })
		costs[charged] = [2]int64{int64(claim), int64(release)}
	}
	if costs[true] != costs[false] || costs[true][0] != 1 {
		t.Fatalf("round trips (claim, release): charged %v, not charged %v; want the same, one claim", costs[true], costs[false])
	}
	if u, err := s.BudgetUsage(ctx, "refunds|t:acme|w:day", time.Time{}, false); err != nil || u.Reserved != 0 {
		t.Fatalf("after the releases: %+v %v, want nothing reserved", u, err)
	}
}

// TestBudgetWaitReplicasOnCluster: on a three-master Redis Cluster with a
// replica per master and wait_replicas 1, a reservation goes to the
// bucket's slot one step at a time, each followed by WAIT. With the
// replicas up, a refund of 60 is reserved once (the bucket's replica
// holds its entry; the same call again and its completion charge nothing
// more). With the bucket's replica killed, a refund of 30 (its record on
// a master whose replica is up, so only the bucket's WAIT fails) is
// refused with ErrNotReplicated: its claim is given back, nothing is
// charged (the bucket still counts 60) and no record is left to run.
func TestBudgetWaitReplicasOnCluster(t *testing.T) {
	cluster := redistest.StartClusterWithReplicas(t, 3)
	client := cluster.Client()
	t.Cleanup(func() { _ = client.Close() })
	s := New(client, Options{Prefix: redistest.Prefix("budwait"), WaitReplicas: 1, WaitTimeout: 300 * time.Millisecond, EffectSweepInterval: -1})
	ctx := context.Background()
	bucket := s.keys.budgetHead() + "refunds|t:acme|w:day}"
	masterOf := func(key string) string {
		t.Helper()
		node, err := client.MasterForKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return node.Options().Addr
	}
	// Two keys whose records live on masters other than the bucket's.
	var keys []string
	for i := 0; len(keys) < 2 && i < 100; i++ {
		key := "k" + strconv.Itoa(i)
		if masterOf(s.keys.record(refundClaim(key, 0).Scope, nil)) != masterOf(bucket) {
			keys = append(keys, key)
		}
	}
	if len(keys) < 2 {
		t.Fatal("no record key away from the bucket's master")
	}
	reserved := func() int64 { t.Helper(); return reservedInRefunds(t, s) }

	first := refundClaim(keys[0], 60)
	d, err := s.Claim(ctx, first)
	if err != nil || d.Outcome != idempotency.OutcomeClaimed {
		t.Fatalf("60 with the replicas up: %v %v", d.Outcome, err)
	}
	again := first
	again.Owner, again.ExecutionID = "owner-again", "exec-again"
	if d2, err := s.Claim(ctx, again); err != nil || d2.Outcome != idempotency.OutcomeInProgress {
		t.Fatalf("the same call again: %v %v, want in progress", d2.Outcome, err)
	}
	if err := s.Complete(ctx, d.Lease, idempotency.StoredResponse{Status: 200, ContentType: "application/json", Body: []byte(`{}`)}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if n := reserved(); n != 60 {
		t.Fatalf("reserved %d, want the 60 once", n)
	}
	replica, err := cluster.ReplicaServing(ctx, bucket)
	if err != nil {
		t.Fatal(err)
	}
	// What the replica holds (READONLY: a cluster replica serves reads
	// of its master's slots on that connection only).
	onReplica := redis.NewClient(&redis.Options{Addr: replica.Addr, OnConnect: func(ctx context.Context, cn *redis.Conn) error {
		return cn.ReadOnly(ctx).Err()
	}})
	t.Cleanup(func() { _ = onReplica.Close() })
	if entries, err := onReplica.HLen(ctx, bucket).Result(); err != nil || entries != 2 { // the entry and the running total
		t.Fatalf("the bucket on its replica: %d fields, %v; want the 60's entry and the total", entries, err)
	}

	replica.Kill()
	second := refundClaim(keys[1], 30)
	d, err = s.Claim(ctx, second)
	if !errors.Is(err, ErrNotReplicated) {
		t.Fatalf("30 with the bucket's replica dead: %v %v, want ErrNotReplicated", d.Outcome, err)
	}
	if n := reserved(); n != 60 {
		t.Fatalf("reserved %d after the refused claim, want 60", n)
	}
	if _, err := s.Get(ctx, second.Scope); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("the refused claim's record: %v, want none", err)
	}
}
