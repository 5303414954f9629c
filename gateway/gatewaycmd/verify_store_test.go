package gatewaycmd

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/boltstore"
	"github.com/toolgateway/toolgateway/gateway/idempotency/pgstore"
	"github.com/toolgateway/toolgateway/gateway/verify"
	"github.com/toolgateway/toolgateway/internal/pgtest"
	"github.com/toolgateway/toolgateway/internal/redistest"
)

// exampleWithStore is docs/gateway.example.yaml with its store section's
// Redis lines replaced by store (indented YAML lines of the section).
func exampleWithStore(t *testing.T, store string) string {
	t.Helper()
	raw, err := os.ReadFile(exampleConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(raw), "\n") {
		switch {
		case strings.HasPrefix(line, "  redis_url:"):
			out = append(out, strings.TrimSuffix(store, "\n"))
		case strings.HasPrefix(line, "  key_prefix:"), strings.HasPrefix(line, "  wait_replicas:"):
		default:
			out = append(out, line)
		}
	}
	return writeConfig(t, strings.Join(out, "\n"))
}

// assertVerifyPassedOn checks a verify run passed, that the guarantees ran
// (charge-card's replay and receipt, the store's layout line passed) and on which store kind.
func assertVerifyPassedOn(t *testing.T, results []verify.Result, err error, kind string) {
	t.Helper()
	if err != nil {
		t.Fatalf("verify -store configured: %v", err)
	}
	if exit := verifyExit(results); exit != nil {
		t.Fatalf("exit: %v\n%+v", exit, results)
	}
	got := verdicts(t, results)
	if got["charge-card/replay runs once"] != verify.Pass || got["charge-card/altered receipt is detected"] != verify.Pass {
		t.Fatalf("want charge-card replay and receipt guarantees PASS, got %v", got)
	}
	for _, r := range results {
		if r.Tool == verify.StoreColumn && (r.Verdict != verify.Pass || !strings.Contains(r.Detail, "("+kind+")")) {
			t.Fatalf("store line %+v, want PASS on %s", r, kind)
		}
	}
}

// Stores whose Close first runs atClose, while the run's records are
// still there; each keeps every method of the store it embeds.
type (
	redisAtClose struct {
		clientOwningStore
		atClose func()
	}
	postgresAtClose struct {
		*pgstore.Store
		atClose func()
	}
	embeddedAtClose struct {
		*boltstore.Store
		atClose func()
	}
)

func (s redisAtClose) Close() error    { s.atClose(); return s.clientOwningStore.Close() }
func (s postgresAtClose) Close() error { s.atClose(); return s.Store.Close() }
func (s embeddedAtClose) Close() error { s.atClose(); return s.Store.Close() }

// countKeys counts the keys matching pattern.
func countKeys(t *testing.T, c *redis.Client, pattern string) int {
	t.Helper()
	keys, err := c.Keys(context.Background(), pattern).Result()
	if err != nil {
		t.Fatal(err)
	}
	return len(keys)
}

// On Redis, verify -store configured runs under <key_prefix>verify-<id>:
// and deletes every key it wrote; a key of the user's under the same
// key_prefix is neither read nor changed.
func TestVerifyStoreConfiguredOnRedisLeavesNoKey(t *testing.T) {
	addr := redistest.Addr(t)
	prefix := redistest.Prefix("verifystore")
	client := redis.NewClient(&redis.Options{Addr: addr})
	defer client.Close()
	defer redistest.CleanPrefix(context.Background(), client, prefix)
	if err := client.Set(t.Context(), prefix+"users-own", "untouched", 0).Err(); err != nil {
		t.Fatal(err)
	}
	path := exampleWithStore(t, "  redis_url: redis://"+addr+"/0\n  key_prefix: \""+prefix+"\"\n")
	duringRun := -1
	wrap := func(s idempotency.Store) idempotency.Store {
		return redisAtClose{s.(clientOwningStore), func() {
			duringRun = countKeys(t, client, prefix+"verify-*")
		}}
	}
	results, err := verifyConfig(t.Context(), path, envOf(nil), verifyRun{storeMode: verifyStoreConfigured, wrap: wrap})
	assertVerifyPassedOn(t, results, err, "redis")
	if duringRun < 1 {
		t.Fatalf("%d keys under %sverify-* while verify ran, want its records there", duringRun, prefix)
	}
	if n := countKeys(t, client, prefix+"*"); n != 1 {
		t.Fatalf("%d keys under %s after verify, want only the user's own", n, prefix)
	}
	if n := countKeys(t, client, prefix+"*{receipts:*"); n != 0 {
		t.Fatalf("%d receipt keys under %s after verify, want none", n, prefix)
	}
	if v, _ := client.Get(t.Context(), prefix+"users-own").Result(); v != "untouched" {
		t.Fatalf("the user's key holds %q after verify", v)
	}
}

// On Redis Cluster the scratch keys spread over the masters' slots; every
// one is deleted afterwards, on every master.
func TestVerifyStoreConfiguredOnRedisClusterLeavesNoKey(t *testing.T) {
	cluster := redistest.StartCluster(t, 3)
	prefix := redistest.Prefix("verifycluster")
	path := exampleWithStore(t, "  cluster_addrs: ["+strings.Join(cluster.Addrs(), ", ")+"]\n  key_prefix: \""+prefix+"\"\n")
	client := cluster.Client()
	keysOnMasters := func() int {
		var n atomic.Int64 // ForEachMaster calls the masters at once
		err := client.ForEachMaster(context.Background(), func(ctx context.Context, master *redis.Client) error {
			keys, err := master.Keys(ctx, prefix+"*").Result()
			n.Add(int64(len(keys)))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return int(n.Load())
	}
	duringRun := -1
	wrap := func(s idempotency.Store) idempotency.Store {
		return redisAtClose{s.(clientOwningStore), func() { duringRun = keysOnMasters() }}
	}
	results, err := verifyConfig(t.Context(), path, envOf(nil), verifyRun{storeMode: verifyStoreConfigured, wrap: wrap})
	assertVerifyPassedOn(t, results, err, "redis-cluster")
	if duringRun < 1 {
		t.Fatalf("%d keys under %s on the masters while verify ran, want its records there", duringRun, prefix)
	}
	if n := keysOnMasters(); n != 0 {
		t.Fatalf("%d keys under %s on the masters after verify, want none", n, prefix)
	}
}

// schemaTables counts the tables of schema (0 too when it does not exist)
// and says whether it exists.
func schemaTables(t *testing.T, url, schema string) (exists bool, tables int) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if err := conn.QueryRow(context.Background(), "SELECT count(*) > 0 FROM pg_namespace WHERE nspname = $1", schema).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1", schema).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	return exists, tables
}

// On PostgreSQL, verify -store configured runs in a schema of its own,
// which it drops afterwards; the configured schema is not touched.
func TestVerifyStoreConfiguredOnPostgresLeavesNoSchema(t *testing.T) {
	url := pgtest.URL(t)
	usersSchema := pgtest.Schema(t, url) // empty: a store there would have tables
	path := exampleWithStore(t, "  postgres_url: "+url+"\n  postgres_schema: "+usersSchema+"\n")
	var scratch string
	tablesDuringRun := 0
	wrap := func(s idempotency.Store) idempotency.Store {
		pg := s.(*pgstore.Store)
		return postgresAtClose{pg, func() {
			scratch = pg.Schema()
			_, tablesDuringRun = schemaTables(t, url, scratch)
		}}
	}
	results, err := verifyConfig(t.Context(), path, envOf(nil), verifyRun{storeMode: verifyStoreConfigured, wrap: wrap})
	assertVerifyPassedOn(t, results, err, "postgres")
	if scratch == usersSchema || tablesDuringRun == 0 {
		t.Fatalf("verify ran in schema %s with %d tables, want a scratch schema with the store's tables", scratch, tablesDuringRun)
	}
	for _, s := range []string{scratch, scratch + "_newer"} {
		if exists, _ := schemaTables(t, url, s); exists {
			t.Errorf("schema %s still exists after verify", s)
		}
	}
	if _, n := schemaTables(t, url, usersSchema); n != 0 {
		t.Fatalf("the configured schema %s has %d tables after verify, want none", usersSchema, n)
	}
}

// The embedded store: a scratch directory beside the configured file,
// removed afterwards; the user's file is byte for byte what it was.
func TestVerifyStoreConfiguredEmbeddedBesideTheFile(t *testing.T) {
	dir := t.TempDir()
	usersFile := filepath.Join(dir, "gw.db")
	s, err := boltstore.Open(usersFile, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	before, _ := os.ReadFile(usersFile)
	var duringRun []string
	wrap := func(s idempotency.Store) idempotency.Store {
		return embeddedAtClose{s.(*boltstore.Store), func() {
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				duringRun = append(duringRun, e.Name())
			}
		}}
	}
	results, err := verifyConfig(t.Context(), exampleWithStore(t, "  path: "+usersFile+"\n"), envOf(nil), verifyRun{storeMode: verifyStoreConfigured, wrap: wrap})
	assertVerifyPassedOn(t, results, err, "embedded")
	if len(duringRun) != 2 || !strings.HasPrefix(duringRun[0], ".gateway-verify-") {
		t.Fatalf("beside the store file while verify ran: %v, want its scratch directory", duringRun)
	}
	after, _ := os.ReadFile(usersFile)
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || string(after) != string(before) {
		t.Fatalf("after verify the directory holds %d entries and the user's file changed: %v; want the file alone, unchanged", len(entries), string(after) != string(before))
	}

	// A directory that does not exist yet is made as start-up would make it,
	// and removed again.
	missing := filepath.Join(t.TempDir(), "var", "lib")
	results, err = verifyConfig(t.Context(), exampleWithStore(t, "  path: "+filepath.Join(missing, "gw.db")+"\n"), envOf(nil), verifyRun{storeMode: verifyStoreConfigured})
	assertVerifyPassedOn(t, results, err, "embedded")
	if _, err := os.Stat(filepath.Dir(missing)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s after verify: %v, want it removed again", filepath.Dir(missing), err)
	}
}

// A configured store that does not answer: exit 1 with a message naming
// the store, never its password, and no result lines.
func TestVerifyStoreConfiguredNamesAStoreThatIsDown(t *testing.T) {
	redisPort := strconv.Itoa(redistest.FreePort(t))
	pgPort := strconv.Itoa(pgtest.FreePort(t))
	for _, c := range []struct{ store, want string }{
		{"  redis_url: redis://:sekrit@127.0.0.1:" + redisPort + "/0\n", "verify: store redis:127.0.0.1:" + redisPort + " does not answer"},
		{"  postgres_url: postgres://gateway:sekrit@127.0.0.1:" + pgPort + "/test\n", "verify: store postgres:127.0.0.1:" + pgPort + "/test schema toolgateway does not answer"},
	} {
		out, err := runVerifyCmd(t, "-config", exampleWithStore(t, c.store), "-store", "configured")
		var status *ExitStatus
		if err == nil || errors.As(err, &status) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "sekrit") || out != "" {
			t.Errorf("verify on a store that is down: %v (output %q), want exit 1 with %q and no password", err, out, c.want)
		}
	}
}

func TestVerifyRefusesAStoreItCannotUse(t *testing.T) {
	out, err := runVerifyCmd(t, "-config", exampleConfigPath, "-store", "production")
	if err == nil || !strings.Contains(err.Error(), `-store "production"`) || out != "" {
		t.Fatalf("verify -store production: %v, want a refusal naming it and nothing run", err)
	}
}
