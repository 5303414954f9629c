package redistest

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestClusterSpreadsKeysAndSurvivesNodeRestart: the cluster serves keys on
// all three masters, and a master killed with SIGKILL and restarted (AOF,
// fsync always) rejoins with its keys.
func TestClusterSpreadsKeysAndSurvivesNodeRestart(t *testing.T) {
	cluster := StartCluster(t, 3, WithAOF())
	client := cluster.Client()
	t.Cleanup(func() { _ = client.Close() })
	ctx := t.Context()

	const keys = 60
	for i := range keys {
		if err := client.Set(ctx, "k"+strconv.Itoa(i), i, 0).Err(); err != nil {
			t.Fatalf("set k%d: %v", i, err)
		}
	}
	var mu sync.Mutex // ForEachMaster calls the function concurrently
	perNode := map[string]int64{}
	err := client.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		n, err := node.DBSize(ctx).Result()
		mu.Lock()
		perNode[node.Options().Addr] = n
		mu.Unlock()
		return err
	})
	if err != nil {
		t.Fatalf("dbsize: %v", err)
	}
	var total int64
	for addr, n := range perNode {
		if n == 0 {
			t.Errorf("master %s holds no keys: %v", addr, perNode)
		}
		total += n
	}
	if len(perNode) != 3 || total != keys {
		t.Fatalf("want %d keys over 3 masters, got %v", keys, perNode)
	}

	victim := cluster.Nodes[1]
	victim.Kill()
	if victim.Running() {
		t.Fatal("killed node still reported running")
	}
	if err := victim.Restart(); err != nil {
		t.Fatalf("restart: %v", err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := cluster.WaitHealthy(waitCtx); err != nil {
		t.Fatal(err)
	}
	for i := range keys {
		got, err := client.Get(ctx, "k"+strconv.Itoa(i)).Int()
		if err != nil || got != i {
			t.Fatalf("after restart k%d = %d, %v; want %d", i, got, err, i)
		}
	}
}

func TestLaunchClusterNeedsThreeMasters(t *testing.T) {
	if _, err := LaunchCluster(t.TempDir(), 2); err == nil {
		t.Fatal("LaunchCluster with 2 masters: want an error")
	}
}
