package redisstore

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/storetest"
)

// TestConformanceOnCluster runs the suite through a ClusterClient against a
// one-node Redis Cluster that serves every slot. The node enforces the
// cluster rules on scripts (declared keys in one slot, undeclared ones in
// the same slot), so a key layout that breaks them fails here with
// CROSSSLOT errors.
func TestConformanceOnCluster(t *testing.T) {
	server := startRedis(t, "--cluster-enabled", "yes",
		"--cluster-config-file", filepath.Join(t.TempDir(), "nodes.conf"))
	admin := redis.NewClient(&redis.Options{Addr: server.addr})
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

	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{server.addr}})
	t.Cleanup(func() { _ = client.Close() })
	storetest.Run(t, func(t *testing.T) idempotency.Store {
		return New(client, Options{Prefix: uniquePrefix(t, client)})
	})
}
