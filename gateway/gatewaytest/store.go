// Package gatewaytest is the test support the gateway's packages share (a
// gateway served over real HTTP on loopback, scripted tools that count
// their executions, the real stores, a go-sdk MCP client on /mcp), so the
// call path's tests and the MCP adapter's (gateway/mcpserver) use one
// harness rather than copies of it.
package gatewaytest

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/boltstore"
	"github.com/toolgateway/toolgateway/gateway/idempotency/pgstore"
	"github.com/toolgateway/toolgateway/gateway/idempotency/redisstore"
	"github.com/toolgateway/toolgateway/internal/pgtest"
	"github.com/toolgateway/toolgateway/internal/redistest"
)

// StoreKind names a store the gateway tests run against.
type StoreKind string

// The stores: Redis and PostgreSQL are the real servers of the test
// environment (redistest, pgtest); embedded is a bbolt file.
const (
	Redis    StoreKind = "redis"
	Embedded StoreKind = "embedded"
	Postgres StoreKind = "postgres"
)

// AllStores are every store kind, for tests that must hold on each.
var AllStores = []StoreKind{Redis, Embedded, Postgres}

// OpenPostgres opens a PostgreSQL store on schema (a schema of the test's
// own, from pgtest.Schema); stores opened on one schema share records and
// limits, as replicas do. The pool is small: the gateway tests run in
// parallel on a server other tests share.
func OpenPostgres(t testing.TB, url, schema string) *pgstore.Store {
	t.Helper()
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	s, err := pgstore.Open(t.Context(), url+sep+"pool_max_conns=8", pgstore.Options{Schema: schema, SweepInterval: -1})
	if err != nil {
		t.Fatalf("open postgres store: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// NewStore opens a fresh, isolated store of the given kind, closed (and
// its keys or schema removed) when the test ends.
func NewStore(t testing.TB, kind StoreKind) idempotency.Store {
	t.Helper()
	switch kind {
	case Redis:
		client := redis.NewClient(&redis.Options{Addr: redistest.Addr(t)})
		prefix := redistest.Prefix("gwtest")
		s := redisstore.New(client, redisstore.Options{Prefix: prefix})
		t.Cleanup(func() {
			redistest.CleanPrefix(context.Background(), client, prefix)
			_ = s.Close()
			_ = client.Close()
		})
		return s
	case Embedded:
		s, err := boltstore.Open(filepath.Join(t.TempDir(), "gw.db"), boltstore.Options{})
		if err != nil {
			t.Fatalf("open embedded store: %v", err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	case Postgres:
		url := pgtest.URL(t)
		return OpenPostgres(t, url, pgtest.Schema(t, url))
	}
	t.Fatalf("unknown store %q", kind)
	return nil
}

// ForEachStore runs f as a parallel subtest on each store kind.
func ForEachStore(t *testing.T, f func(t *testing.T, kind StoreKind)) {
	for _, kind := range AllStores {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			f(t, kind)
		})
	}
}
