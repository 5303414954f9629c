package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster of private redis-server masters (no replicas)
// on free loopback ports, each node in its own directory so that a killed
// node restarts with its nodes.conf (and, WithAOF, its data) and rejoins.
type Cluster struct {
	// Nodes are the masters, in the order they were created.
	Nodes []*Server
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
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skip(bin + " not on PATH")
		}
	}
	c, err := LaunchCluster(t.TempDir(), masters, opts...)
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
	if masters < 3 {
		return nil, fmt.Errorf("redistest: a cluster needs at least 3 masters, got %d", masters)
	}
	c := &Cluster{}
	for i := range masters {
		busPort, err := freePort()
		if err != nil {
			c.Kill()
			return nil, err
		}
		nodeOpts := append([]Option{WithArgs("--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", clusterNodeTimeout,
			"--cluster-port", strconv.Itoa(busPort))}, opts...)
		node, err := Launch(filepath.Join(dir, "node"+strconv.Itoa(i)), nodeOpts...)
		if err != nil {
			c.Kill()
			return nil, err
		}
		c.Nodes = append(c.Nodes, node)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		c.Kill()
		return nil, fmt.Errorf("redistest: redis-cli --cluster create: %w: %s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.WaitHealthy(ctx); err != nil {
		c.Kill()
		return nil, err
	}
	return c, nil
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
	for _, n := range c.Nodes {
		probe := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
		err := waitClusterOK(ctx, probe)
		_ = probe.Close()
		if err != nil {
			return fmt.Errorf("redistest: cluster node %s: %w", n.Addr, err)
		}
	}
	return nil
}

func waitClusterOK(ctx context.Context, probe *redis.Client) error {
	var last string
	for {
		info, err := probe.ClusterInfo(ctx).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") &&
			strings.Contains(info, "cluster_slots_ok:16384") {
			return nil
		}
		last = info
		if err != nil {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not healthy (%s): %w", strings.TrimSpace(last), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Kill stops every node with SIGKILL.
func (c *Cluster) Kill() {
	for _, n := range c.Nodes {
		n.Kill()
	}
}

// Launch starts a private redis-server on a free port in dir (created if
// needed) without a testing.TB, for programs such as cmd/chaos; the caller
// must call Kill. Start is the test variant.
func Launch(dir string, opts ...Option) (*Server, error) {
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
