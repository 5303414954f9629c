package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"time"

	"github.com/toolgateway/toolgateway/internal/redistest"
)

// backend is the Redis the gateways share: one server or a cluster, every
// node with AOF and fsync always, so a SIGKILL loses no acknowledged write.
type backend struct {
	single  *redistest.Server
	cluster *redistest.Cluster
}

func startBackend(dir string, cluster bool) (*backend, error) {
	if cluster {
		c, err := redistest.LaunchCluster(filepath.Join(dir, "cluster"), 3, redistest.WithAOF())
		if err != nil {
			return nil, fmt.Errorf("chaos: %w", err)
		}
		return &backend{cluster: c}, nil
	}
	s, err := redistest.Launch(filepath.Join(dir, "redis"), redistest.WithAOF())
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	return &backend{single: s}, nil
}

func (b *backend) store() storeSection {
	if b.cluster != nil {
		return storeSection{ClusterAddrs: b.cluster.Addrs()}
	}
	return storeSection{RedisURL: "redis://" + b.single.Addr + "/0"}
}

func (b *backend) describe() string {
	if b.cluster != nil {
		return "redis-cluster(3 masters: " + strings.Join(b.cluster.Addrs(), ",") + ")"
	}
	return "redis(" + b.single.Addr + ")"
}

// restartOne kills one Redis node (a random master of the cluster) with
// SIGKILL and starts it again on its port and data directory; it returns
// the node's address.
func (b *backend) restartOne(ctx context.Context, rng *rand.Rand) (string, error) {
	node := b.single
	if b.cluster != nil {
		node = b.cluster.Nodes[rng.IntN(len(b.cluster.Nodes))]
	}
	node.Kill()
	if err := node.Restart(); err != nil {
		return node.Addr, fmt.Errorf("chaos: restart redis %s: %w", node.Addr, err)
	}
	if b.cluster != nil {
		waitCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if err := b.cluster.WaitHealthy(waitCtx); err != nil {
			return node.Addr, fmt.Errorf("chaos: %w", err)
		}
	}
	return node.Addr, nil
}

func (b *backend) kill() {
	if b.cluster != nil {
		b.cluster.Kill()
		return
	}
	b.single.Kill()
}
