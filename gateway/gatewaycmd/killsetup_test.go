package gatewaycmd

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/internal/pgtest"
	"github.com/toolgateway/toolgateway/internal/redistest"
)

// buildGateway builds the real gateway program (cmd/gateway) into a
// temporary directory of t, for the tests that start and kill it.
func buildGateway(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gateway")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/toolgateway/toolgateway/cmd/gateway").CombinedOutput(); err != nil {
		t.Fatalf("go build cmd/gateway: %v\n%s", err, out)
	}
	return bin
}

// killTestStores is, by store name, the config's store section of each
// store a gateway may be killed on and started again: the embedded store
// (a file of the test's own), Redis (a key prefix named after name,
// removed afterwards), a three-master Redis Cluster of the test's own
// (stopped afterwards) and PostgreSQL (a schema of the test's own).
func killTestStores(name string) map[string]func(t *testing.T) string {
	return map[string]func(t *testing.T) string{
		"embedded": func(t *testing.T) string { return "store:\n  path: " + filepath.Join(t.TempDir(), "gw.db") + "\n" },
		"redis": func(t *testing.T) string {
			addr, prefix := redistest.Addr(t), redistest.Prefix(name)
			t.Cleanup(func() {
				c := redis.NewClient(&redis.Options{Addr: addr})
				redistest.CleanPrefix(context.Background(), c, prefix)
				_ = c.Close()
			})
			return "store:\n  redis_url: redis://" + addr + "/0\n  key_prefix: \"" + prefix + "\"\n"
		},
		"redis-cluster": func(t *testing.T) string {
			cluster := redistest.StartCluster(t, 3)
			return fmt.Sprintf("store:\n  cluster_addrs: [%s]\n  key_prefix: %q\n", strings.Join(cluster.Addrs(), ", "), redistest.Prefix(name))
		},
		"postgres": func(t *testing.T) string {
			url := pgtest.URL(t)
			return "store:\n  postgres_url: " + url + "\n  postgres_schema: " + pgtest.Schema(t, url) + "\n"
		},
	}
}

// quickCall calls tool with derived key headers, answering at once (no
// Prefer: wait); a call whose gateway died answers the zero reply.
func quickCall(t *testing.T, addr, session string, step uint64, tool, args string) reply {
	t.Helper()
	req, err := keyedRequest(addr, session, step, tool, args)
	if err != nil {
		t.Error(err)
		return reply{}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return reply{} // the killed holder's call
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: body}
}
