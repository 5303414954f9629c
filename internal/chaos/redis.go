package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/toolgateway/toolgateway/internal/pgtest"
	"github.com/toolgateway/toolgateway/internal/redistest"
)

// backend is the store the gateways share: one Redis or a Redis Cluster,
// every node with AOF and fsync always, or a PostgreSQL (default settings:
// synchronous_commit on), so a SIGKILL loses no acknowledged write.
type backend struct {
	single   *redistest.Server
	cluster  *redistest.Cluster
	postgres *pgtest.Server
	pgDir    string // the private server's directory, removed by kill
}

func startBackend(dir string, cluster, postgres bool) (*backend, error) {
	if postgres {
		// Not under dir: as root the server runs as the postgres user,
		// which must be able to reach its directory.
		pgDir, err := os.MkdirTemp("", "chaos-postgres-")
		if err != nil {
			return nil, fmt.Errorf("chaos: %w", err)
		}
		s, err := pgtest.Launch(pgDir)
		if err != nil {
			_ = os.RemoveAll(pgDir)
			return nil, fmt.Errorf("chaos: %w", err)
		}
		return &backend{postgres: s, pgDir: pgDir}, nil
	}
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
	if b.postgres != nil {
		return storeSection{PostgresURL: b.postgres.URL}
	}
	if b.cluster != nil {
		return storeSection{ClusterAddrs: b.cluster.Addrs()}
	}
	return storeSection{RedisURL: "redis://" + b.single.Addr + "/0"}
}

func (b *backend) describe() string {
	if b.postgres != nil {
		return "postgres(127.0.0.1:" + strconv.Itoa(b.postgres.Port) + ")"
	}
	if b.cluster != nil {
		return "redis-cluster(3 masters: " + strings.Join(b.cluster.Addrs(), ",") + ")"
	}
	return "redis(" + b.single.Addr + ")"
}

// restartOne kills one Redis node (a random master of the cluster) with
// SIGKILL, leaves it down for downFor, and starts it again on its port and
// data directory; it returns the node's address and when it was down.
func (b *backend) restartOne(ctx context.Context, rng *rand.Rand, downFor time.Duration) (string, outage, error) {
	var out outage
	if b.postgres != nil {
		b.postgres.Kill()
		out.From = time.Now()
		time.Sleep(downFor)
		addr := "127.0.0.1:" + strconv.Itoa(b.postgres.Port)
		if err := b.postgres.Restart(); err != nil {
			return addr, out, fmt.Errorf("chaos: restart postgres %s: %w", addr, err)
		}
		out.To = time.Now()
		return addr, out, nil
	}
	node := b.single
	if b.cluster != nil {
		node = b.cluster.Nodes[rng.IntN(len(b.cluster.Nodes))]
	}
	node.Kill()
	out.From = time.Now()
	time.Sleep(downFor)
	if err := node.Restart(); err != nil {
		return node.Addr, out, fmt.Errorf("chaos: restart redis %s: %w", node.Addr, err)
	}
	out.To = time.Now()
	if b.cluster != nil {
		waitCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if err := b.cluster.WaitHealthy(waitCtx); err != nil {
			return node.Addr, out, fmt.Errorf("chaos: %w", err)
		}
		out.To = time.Now()
	}
	return node.Addr, out, nil
}

// outage is one interval in which the store was down.
type outage struct{ From, To time.Time }

func (b *backend) kill() {
	if b.postgres != nil {
		b.postgres.Kill()
		_ = os.RemoveAll(b.pgDir)
		return
	}
	if b.cluster != nil {
		b.cluster.Kill()
		return
	}
	b.single.Kill()
}
