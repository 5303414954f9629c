package redisstore

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/storetest"
	"github.com/toolgateway/toolgateway/internal/redistest"
)

func TestConformance(t *testing.T) {
	client := testClient(t)
	storetest.Run(t, func(t *testing.T) idempotency.Store {
		return New(client, Options{Prefix: uniquePrefix(t, client)})
	})
}

// TestConformanceOnCluster runs the suite through a ClusterClient against a
// one-node Redis Cluster that serves every slot. The node enforces the
// cluster rules on scripts (declared keys in one slot, undeclared ones in
// the same slot), so a key layout that breaks them fails here with
// CROSSSLOT errors.
func TestConformanceOnCluster(t *testing.T) {
	client := oneNodeCluster(t)
	storetest.Run(t, func(t *testing.T) idempotency.Store {
		return New(client, Options{Prefix: uniquePrefix(t, client)})
	})
}

// oneNodeCluster starts a private one-node Redis Cluster serving every slot
// and returns a ClusterClient on it.
func oneNodeCluster(t *testing.T) *redis.ClusterClient {
	t.Helper()
	server := redistest.Start(t, redistest.WithArgs("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"))
	admin := redis.NewClient(&redis.Options{Addr: server.Addr})
	t.Cleanup(func() { _ = admin.Close() })
	ctx := t.Context()
	if err := admin.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil {
		t.Fatalf("assign slots: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := admin.ClusterInfo(ctx).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster not ready: %q, %v", info, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{server.Addr}})
	t.Cleanup(func() { _ = client.Close() })
	return client
}

// TestClusterKeyNotBoundToStepIsFoundByScope: on a cluster, a key that is
// not derived from its step (opaque mode) lives by its scope alone, so a
// retry that names another session (or none) still meets its record: same
// arguments replay, other arguments are refused as reused — the tool never
// runs twice. A key bound to its step keeps the step guard.
func TestClusterKeyNotBoundToStepIsFoundByScope(t *testing.T) {
	client := oneNodeCluster(t)
	s := New(client, Options{Prefix: uniquePrefix(t, client)})
	ctx := t.Context()
	scope := idempotency.Scope{Tenant: "acme", Tool: "charge", Key: "order-7"}
	claim := func(step *idempotency.Step, fp string, bound bool) idempotency.Decision {
		d, err := s.Claim(ctx, idempotency.ClaimRequest{
			Scope: scope, Fingerprint: fp, Step: step, StepGuard: true, StepBoundKey: bound,
			ExecutionID: "exec-" + fp, Owner: "owner-" + time.Now().String(), LockTTL: 10 * time.Second, ReplayTTL: time.Minute,
			LeaseExpiry: idempotency.LeaseExpiryRerun,
		})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	first := claim(&idempotency.Step{SessionID: "s1", Index: 1}, "fp-a", false)
	if first.Outcome != idempotency.OutcomeClaimed {
		t.Fatalf("first claim: %v", first.Outcome)
	}
	if err := s.Complete(ctx, first.Lease, idempotency.StoredResponse{Status: 200, Body: []byte(`{}`)}, time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, step := range []*idempotency.Step{{SessionID: "s2", Index: 9}, nil} {
		if d := claim(step, "fp-a", false); d.Outcome != idempotency.OutcomeReplay || d.ExecutionID != first.ExecutionID {
			t.Fatalf("same key, step %v: %v %s, want the replay", step, d.Outcome, d.ExecutionID)
		}
	}
	if d := claim(&idempotency.Step{SessionID: "s3", Index: 1}, "fp-b", false); d.Outcome != idempotency.OutcomeKeyReused {
		t.Fatalf("same key, other arguments: %v", d.Outcome)
	}
	if rec, err := s.Get(ctx, scope); err != nil || rec.State != idempotency.StateCompleted {
		t.Fatalf("admin get: %+v %v", rec, err)
	}

	// Bound keys (derived mode) keep the step guard on the cluster.
	a := idempotency.Scope{Tenant: "acme", Tool: "charge", Key: "bound-a"}
	b := idempotency.Scope{Tenant: "acme", Tool: "charge", Key: "bound-b"}
	step := &idempotency.Step{SessionID: "s9", Index: 4}
	for i, sc := range []idempotency.Scope{a, b} {
		d, err := s.Claim(ctx, idempotency.ClaimRequest{Scope: sc, Fingerprint: "fp", Step: step, StepGuard: true, StepBoundKey: true,
			ExecutionID: "e", Owner: "o" + sc.Key, LockTTL: 10 * time.Second, ReplayTTL: time.Minute, LeaseExpiry: idempotency.LeaseExpiryRerun})
		want := []idempotency.Outcome{idempotency.OutcomeClaimed, idempotency.OutcomeStepConflict}[i]
		if err != nil || d.Outcome != want {
			t.Fatalf("bound key %s: %v %v, want %v", sc.Key, d.Outcome, err, want)
		}
	}
}

// TestConformanceOnThreeMasterCluster runs the suite against a real
// three-master Redis Cluster (redis-cli --cluster create), through the
// same ClusterClient the gateway builds from store.cluster_addrs, so the
// records, step entries and pointer sets of one suite spread over all
// masters. A script whose keys left their hash slot fails with CROSSSLOT.
func TestConformanceOnThreeMasterCluster(t *testing.T) {
	cluster := redistest.StartCluster(t, 3)
	client := cluster.Client()
	t.Cleanup(func() { _ = client.Close() })
	storetest.Run(t, func(t *testing.T) idempotency.Store {
		// A private cluster, killed at the end: no cleanup of the prefix.
		return New(client, Options{Prefix: redistest.Prefix("conf")})
	})
	// After the (parallel) subtests: cleanups run last-registered first,
	// so the cluster is still up.
	t.Cleanup(func() {
		// Prove the suite's scripts ran on every master (its keys are gone by
		// now: the suite deletes or expires them).
		var mu sync.Mutex // ForEachMaster calls the function concurrently
		masters := 0
		err := client.ForEachMaster(context.Background(), func(ctx context.Context, node *redis.Client) error {
			stats, err := node.Info(ctx, "commandstats").Result()
			if err == nil && strings.Contains(stats, "cmdstat_evalsha:calls=") {
				mu.Lock()
				masters++
				mu.Unlock()
			}
			return err
		})
		if err != nil {
			t.Errorf("commandstats: %v", err)
		}
		if masters != 3 {
			t.Errorf("the suite ran scripts on %d masters, want 3", masters)
		}
	})
}

func TestReceiptOutbox(t *testing.T) {
	client := testClient(t)
	storetest.RunOutbox(t, func(t *testing.T, outbox bool) idempotency.Store {
		return New(client, Options{Prefix: uniquePrefix(t, client), ReceiptOutbox: outbox})
	})
}

// TestReceiptOutboxOnCluster: on a Cluster the outbox is one key per
// record tag, found by SCAN.
func TestReceiptOutboxOnCluster(t *testing.T) {
	client := oneNodeCluster(t)
	storetest.RunOutbox(t, func(t *testing.T, outbox bool) idempotency.Store {
		return New(client, Options{Prefix: uniquePrefix(t, client), ReceiptOutbox: outbox})
	})
}
