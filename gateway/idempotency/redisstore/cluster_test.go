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

// TestConformanceOnCluster runs the suite through a ClusterClient against a
// one-node Redis Cluster that serves every slot. The node enforces the
// cluster rules on scripts (declared keys in one slot, undeclared ones in
// the same slot), so a key layout that breaks them fails here with
// CROSSSLOT errors.
func TestConformanceOnCluster(t *testing.T) {
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
	storetest.Run(t, func(t *testing.T) idempotency.Store {
		return New(client, Options{Prefix: uniquePrefix(t, client)})
	})
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
