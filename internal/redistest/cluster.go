package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster of private redis-server masters (and, from
// StartClusterWithReplicas, one replica each) on free loopback ports, each
// node in its own directory so that a killed node restarts with its
// nodes.conf (and, WithAOF, its data) and rejoins.
type Cluster struct {
	// Nodes are the masters, in the order they were created.
	Nodes []*Server
	// Replicas are the replicas (none from StartCluster).
	Replicas []*Server
}

// clusterNodeTimeout is short so that a test sees a dead master marked
// failed (and healthy again) within seconds, not the default 15 s.
const clusterNodeTimeout = "2000"

// StartCluster starts a cluster of masters nodes (at least 3, as
// redis-cli --cluster create requires) for the test and kills it when the
// test ends. The test is skipped only when redis-server or redis-cli is not
// installed.
func StartCluster(t testing.TB, masters int, opts ...Option) *Cluster {
	t.Helper()
	return startCluster(t, masters, 0, opts...)
}

// StartClusterWithReplicas is StartCluster with one replica per master
// (for WAIT: a write acknowledged by its master's replica, or not once the
// replica is killed). It returns once every replica is in sync.
func StartClusterWithReplicas(t testing.TB, masters int, opts ...Option) *Cluster {
	t.Helper()
	return startCluster(t, masters, 1, opts...)
}

func startCluster(t testing.TB, masters, replicas int, opts ...Option) *Cluster {
	t.Helper()
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skip(bin + " not on PATH")
		}
	}
	c, err := launchCluster(t.TempDir(), masters, replicas, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Kill)
	return c
}

// LaunchCluster starts a cluster of masters nodes under dir without a
// testing.TB, for programs such as cmd/chaos; the caller must call Kill.
// It returns once every node reports cluster_state:ok.
func LaunchCluster(dir string, masters int, opts ...Option) (*Cluster, error) {
	return launchCluster(dir, masters, 0, opts...)
}

// launchCluster is LaunchCluster with replicas replicas per master.
func launchCluster(dir string, masters, replicas int, opts ...Option) (*Cluster, error) {
	if masters < 3 {
		return nil, fmt.Errorf("redistest: a cluster needs at least 3 masters, got %d", masters)
	}
	c := &Cluster{}
	for i := range masters * (1 + replicas) {
		node, err := retryTakenPort(func() (*Server, error) {
			busPort, err := freePort()
			if err != nil {
				return nil, err
			}
			nodeOpts := append([]Option{WithArgs("--cluster-enabled", "yes",
				"--cluster-config-file", "nodes.conf",
				"--cluster-node-timeout", clusterNodeTimeout,
				"--cluster-port", strconv.Itoa(busPort))}, opts...)
			return launchOnce(filepath.Join(dir, "node"+strconv.Itoa(i)), nodeOpts...)
		})
		if err != nil {
			c.Kill()
			return nil, err
		}
		c.Nodes = append(c.Nodes, node)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		c.Kill()
		return nil, fmt.Errorf("redistest: redis-cli --cluster create: %w: %s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := c.WaitHealthy(ctx)
	if err == nil && replicas > 0 {
		err = c.splitReplicas(ctx)
	}
	if err != nil {
		c.Kill()
		return nil, err
	}
	return c, nil
}

// splitReplicas moves the nodes redis-cli made replicas from Nodes to
// Replicas, once each reports its link to its master up (so a WAIT counts
// it).
func (c *Cluster) splitReplicas(ctx context.Context) error {
	var masters []*Server
	err := probeEach(ctx, c.Nodes, func(n *Server, probe *redis.Client) error {
		role, err := waitRole(ctx, probe)
		if role == "master" {
			masters = append(masters, n)
		} else if err == nil {
			c.Replicas = append(c.Replicas, n)
		}
		return err
	})
	if err != nil {
		return err
	}
	c.Nodes = masters
	// Every node's slot map names the replicas too, once gossip spread
	// them (what ReplicaServing and a client's view read).
	return probeEach(ctx, append(c.Nodes, c.Replicas...), func(_ *Server, probe *redis.Client) error {
		return waitReplicasListed(ctx, probe)
	})
}

// probeEach calls wait with a client on each node in turn (one that does
// not retry: wait polls), until one fails.
func probeEach(ctx context.Context, nodes []*Server, wait func(n *Server, probe *redis.Client) error) error {
	for _, n := range nodes {
		probe := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
		err := wait(n, probe)
		_ = probe.Close()
		if err != nil {
			return fmt.Errorf("redistest: cluster node %s: %w", n.Addr, err)
		}
	}
	return nil
}

// waitReplicasListed waits until the node's CLUSTER SHARDS lists a
// replica beside the master of every shard.
func waitReplicasListed(ctx context.Context, probe *redis.Client) error {
	return poll(ctx, func() (bool, string) {
		shards, err := probe.ClusterShards(ctx).Result()
		listed := err == nil && len(shards) > 0
		for _, shard := range shards {
			listed = listed && len(shard.Nodes) > 1
		}
		return listed, "replicas not in the shard map"
	})
}

// waitRole answers "master", or "slave" once the replica's link to its
// master is up.
func waitRole(ctx context.Context, probe *redis.Client) (role string, err error) {
	err = poll(ctx, func() (bool, string) {
		info, err := probe.Info(ctx, "replication").Result()
		switch {
		case err == nil && strings.Contains(info, "role:master"):
			role = "master"
		case err == nil && strings.Contains(info, "master_link_status:up"):
			role = "slave"
		}
		return role != "", "no master, nor a replica in sync"
	})
	return role, err
}

// ReplicaServing returns the replica of the master that serves key's
// slot.
func (c *Cluster) ReplicaServing(ctx context.Context, key string) (*Server, error) {
	client := c.Client()
	defer client.Close()
	slot, err := client.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		return nil, fmt.Errorf("redistest: key slot: %w", err)
	}
	shards, err := client.ClusterShards(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("redistest: cluster shards: %w", err)
	}
	for _, shard := range shards {
		if !slices.ContainsFunc(shard.Slots, func(r redis.SlotRange) bool { return r.Start <= slot && slot <= r.End }) {
			continue
		}
		for _, node := range shard.Nodes {
			addr := net.JoinHostPort(node.IP, strconv.FormatInt(node.Port, 10))
			for _, s := range c.Replicas {
				if node.Role == "replica" && s.Addr == addr {
					return s, nil
				}
			}
		}
	}
	return nil, fmt.Errorf("redistest: no replica serves slot %d", slot)
}

// Addrs returns the masters' host:port addresses (what a ClusterClient or
// the gateway's store.cluster_addrs takes).
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr
	}
	return addrs
}

// Client returns a ClusterClient on the cluster; the caller closes it.
func (c *Cluster) Client() *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
}

// WaitHealthy waits until every node answers and reports cluster_state:ok
// with all 16384 slots served (after creation, or after a node restarted).
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	return probeEach(ctx, c.Nodes, func(_ *Server, probe *redis.Client) error { return waitClusterOK(ctx, probe) })
}

func waitClusterOK(ctx context.Context, probe *redis.Client) error {
	return poll(ctx, func() (bool, string) {
		info, err := probe.ClusterInfo(ctx).Result()
		if err != nil {
			return false, "not healthy: " + err.Error()
		}
		return strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_slots_ok:16384"),
			"not healthy: " + strings.TrimSpace(info)
	})
}

// poll calls check every 50 ms until it reports done; when ctx ends
// first, the error says what check saw last.
func poll(ctx context.Context, check func() (done bool, last string)) error {
	for {
		done, last := check()
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", last, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Kill stops every node with SIGKILL.
func (c *Cluster) Kill() {
	for _, n := range append(c.Nodes, c.Replicas...) {
		n.Kill()
	}
}

// Launch starts a private redis-server on a free port in dir (created if
// needed) without a testing.TB, for programs such as cmd/chaos; the caller
// must call Kill. Start is the test variant.
func Launch(dir string, opts ...Option) (*Server, error) {
	return retryTakenPort(func() (*Server, error) { return launchOnce(dir, opts...) })
}

// retryTakenPort calls launch again, up to a few times, while it fails
// because a port it chose was taken before the server could bind it
// (another process on a busy machine): each call chooses new ports.
func retryTakenPort(launch func() (*Server, error)) (*Server, error) {
	const attempts = 5
	for attempt := 1; ; attempt++ {
		s, err := launch()
		var start *startError
		if err == nil || !errors.As(err, &start) || !start.taken || attempt == attempts {
			return s, err
		}
	}
}

// launchOnce starts a redis-server on a free port in dir.
func launchOnce(dir string, opts ...Option) (*Server, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("redistest: %w", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &Server{Port: port, Addr: "127.0.0.1:" + strconv.Itoa(port), Dir: dir,
		args: []string{"--save", "", "--appendonly", "no"}}
	for _, o := range opts {
		o(s)
	}
	if err := s.Restart(); err != nil {
		s.Kill()
		return nil, err
	}
	return s, nil
}

// Running reports whether the server process is up (not killed).
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("redistest: free port: %w", err)
	}
	defer l.Close()
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		return 0, errors.New("redistest: free port: not a TCP address")
	}
	return addr.Port, nil
}
