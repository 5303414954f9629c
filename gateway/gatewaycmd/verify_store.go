package gatewaycmd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/oklog/ulid/v2"
	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/boltstore"
	"github.com/toolgateway/toolgateway/gateway/idempotency/pgstore"
	"github.com/toolgateway/toolgateway/gateway/idempotency/redisstore"
	"github.com/toolgateway/toolgateway/gateway/verify"
)

// The values of `gateway verify -store`.
const (
	// verifyStoreScratch runs the guarantees on a fresh embedded store in a
	// temporary directory, whatever store the config names.
	verifyStoreScratch = "scratch"
	// verifyStoreConfigured runs them on the configured store kind itself,
	// in a part of it no gateway uses: a Redis key prefix, a PostgreSQL
	// schema, an embedded file beside the configured one.
	verifyStoreConfigured = "configured"
)

// storeReachTimeout bounds verify's first contact with the configured store.
const storeReachTimeout = 5 * time.Second

// scratchRemoveTimeout bounds the removal of a run's scratch part (which
// runs even when the run was interrupted).
const scratchRemoveTimeout = 30 * time.Second

// scratchSpace is where one verify run keeps its records, and how it
// leaves nothing behind.
type scratchSpace struct {
	// kind is one of the storeKind constants.
	kind string
	// cfg is the user's config whose store section names the scratch space
	// (store.migrate on: it starts empty).
	cfg *Config
	// newer is the second scratch space, which the layout guarantee marks
	// as a newer gateway would leave it.
	newer *Config
	// desc names the scratch space (never a password).
	desc string
	// remove deletes everything the run wrote; it runs once the stores
	// are closed.
	remove func(ctx context.Context) error
}

// newScratchSpace makes the scratch space of mode for cfg (checked by
// prepare). For -store configured it reaches the store first: one that
// does not answer is an error naming it.
func newScratchSpace(ctx context.Context, cfg *Config, choice storeChoice, mode string) (*scratchSpace, error) {
	if mode == verifyStoreScratch {
		dir, err := os.MkdirTemp("", "gateway-verify-")
		if err != nil {
			return nil, fmt.Errorf("verify: scratch directory: %w", err)
		}
		return embeddedSpace(cfg, dir, func(context.Context) error { return removeScratchDir(dir) }), nil
	}
	id := strings.ToLower(ulid.Make().String())
	switch choice.kind {
	case storeKindRedis, storeKindRedisCluster:
		return redisSpace(ctx, cfg, choice, id)
	case storeKindPostgres:
		return postgresSpace(ctx, cfg, choice, id)
	}
	return besideEmbedded(cfg, choice)
}

// scratch is the space as the verify harness takes it: its stores opened
// as start-up opens them, with the receipts start-up keeps beside them.
func (space *scratchSpace) scratch() verify.Scratch {
	discard := slog.New(slog.DiscardHandler)
	return verify.Scratch{
		Name: space.desc,
		Kind: space.kind,
		Open: func(ctx context.Context) (idempotency.Store, error) {
			store, _, err := space.cfg.openStoreAnyLayout(ctx, discard)
			return store, err
		},
		Receipts: space.cfg.receiptsFor,
		MarkNewerLayout: func(ctx context.Context) error {
			return markNewerLayout(ctx, space)
		},
		OpenNewer: func(ctx context.Context) (idempotency.Store, error) {
			noMigrate := *space.newer
			noMigrate.Store.Migrate = new(bool)
			store, _, err := noMigrate.openStoreAnyLayout(ctx, discard)
			return store, err
		},
	}
}

// markNewerLayout sets the layout up in the space's second store and then
// records there the layout version after the newest this gateway knows,
// where each kind keeps it (the place `gateway migrate -print` names).
func markNewerLayout(ctx context.Context, space *scratchSpace) error {
	store, _, err := space.newer.openStoreAnyLayout(ctx, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	layouts, ok := store.(idempotency.Layouts)
	if !ok {
		_ = store.Close()
		return fmt.Errorf("the %s store has no layout version", space.kind)
	}
	v, err := layouts.LayoutVersion(ctx)
	if err == nil {
		switch s := store.(type) {
		case clientOwningStore:
			err = s.client.Set(ctx, space.newer.Store.KeyPrefix+"layout", v.Known+1, 0).Err()
		case *pgstore.Store:
			_, err = s.Pool().Exec(ctx, "INSERT INTO "+s.Schema()+".schema_version (version) VALUES ($1)", v.Known+1)
		}
	}
	if closeErr := store.Close(); err == nil {
		err = closeErr
	}
	if err == nil && space.kind == storeKindEmbedded {
		err = boltstore.MarkNewerLayout(space.newer.Store.Path) // a closed file only
	}
	if err != nil {
		return fmt.Errorf("marking a newer layout in %s: %w", space.desc, err)
	}
	return nil
}

// withStore is a copy of cfg whose store section is edit(cfg's), with
// store.migrate on.
func withStore(cfg *Config, edit func(*StoreConfig)) *Config {
	c := *cfg
	edit(&c.Store)
	c.Store.Migrate = nil
	return &c
}

// embeddedSpace keeps the run's records in verify.db and newer.db in dir.
func embeddedSpace(cfg *Config, dir string, remove func(context.Context) error) *scratchSpace {
	at := func(name string) *Config {
		return withStore(cfg, func(s *StoreConfig) { *s = StoreConfig{Path: filepath.Join(dir, name)} })
	}
	return &scratchSpace{kind: storeKindEmbedded, cfg: at("verify.db"), newer: at("newer.db"),
		desc: "embedded:" + dir, remove: remove}
}

// besideEmbedded is a scratch directory beside the configured store file
// (its directory is made as start-up would make it, and removed again if
// verify made it): the same file system, the same rights.
func besideEmbedded(cfg *Config, choice storeChoice) (*scratchSpace, error) {
	parent := filepath.Dir(cfg.path(cfg.Store.Path))
	made := firstMissing(parent)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("verify: store %s: %w", choice.desc, err)
	}
	dir, err := os.MkdirTemp(parent, ".gateway-verify-")
	if err != nil {
		return nil, fmt.Errorf("verify: store %s: a scratch directory beside it: %w", choice.desc, err)
	}
	return embeddedSpace(cfg, dir, func(context.Context) error {
		if err := removeScratchDir(dir); err != nil {
			return err
		}
		// The directories verify made, while empty: one that is not (the
		// gateway has started meanwhile, say) is left, and so are its parents.
		for d := parent; made != "" && strings.HasPrefix(d, made); d = filepath.Dir(d) {
			if os.Remove(d) != nil {
				break
			}
		}
		return nil
	}), nil
}

// removeScratchDir removes a run's scratch directory and what it holds.
func removeScratchDir(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("verify: removing the scratch directory %s: %w", dir, err)
	}
	return nil
}

// firstMissing is the outermost directory of path's ancestry (path
// included) that does not exist ("" when path exists).
func firstMissing(path string) string {
	missing := ""
	for d := path; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil || filepath.Dir(d) == d {
			return missing
		}
		missing = d
	}
}

// redisSpace is the key prefix <configured prefix>verify-<id>: on the
// configured Redis or Redis Cluster; the newer store is under
// <that prefix>newer:, so one SCAN finds every key of the run.
func redisSpace(ctx context.Context, cfg *Config, choice storeChoice, id string) (*scratchSpace, error) {
	prefix := orString(cfg.Store.KeyPrefix, redisstore.DefaultPrefix) + "verify-" + id + ":"
	// go-redis would print each failed dial on stderr; the error below says it once.
	redis.SetLogger(redisLogger{log: slog.New(slog.DiscardHandler)})
	client := cfg.redisClient()
	defer client.Close()
	pingCtx, cancel := context.WithTimeout(ctx, storeReachTimeout)
	defer cancel()
	if err := client.Ping(pingCtx).Err(); err != nil {
		return nil, fmt.Errorf("verify: store %s does not answer: %w", choice.desc, err)
	}
	return &scratchSpace{kind: choice.kind,
		cfg:   withStore(cfg, func(s *StoreConfig) { s.KeyPrefix = prefix }),
		newer: withStore(cfg, func(s *StoreConfig) { s.KeyPrefix = prefix + "newer:" }),
		desc:  choice.desc + " prefix " + prefix,
		remove: func(ctx context.Context) error {
			return deleteRedisPrefix(ctx, cfg, prefix)
		},
	}, nil
}

// deleteRedisPrefix deletes every key under prefix, the receipts' among
// them (SCAN on every master, one DEL a key: on a cluster the keys are in
// many slots). Never a flush.
func deleteRedisPrefix(ctx context.Context, cfg *Config, prefix string) error {
	client := cfg.redisClient()
	defer client.Close()
	deleteOn := func(ctx context.Context, node *redis.Client) error {
		iter := node.Scan(ctx, 0, redisGlobEscape(prefix)+"*", 500).Iterator()
		for iter.Next(ctx) {
			if err := client.Del(ctx, iter.Val()).Err(); err != nil {
				return err
			}
		}
		return iter.Err()
	}
	var err error
	switch c := client.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, deleteOn)
	case *redis.Client:
		err = deleteOn(ctx, c)
	}
	if err != nil {
		return fmt.Errorf("verify: removing the scratch keys %s*: %w", prefix, err)
	}
	return nil
}

// redisGlobEscape quotes the SCAN MATCH metacharacters of s (a configured
// prefix may hold them).
func redisGlobEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// postgresSpace is two schemas verify_<id> and verify_<id>_newer in the
// configured database, created here (without IF NOT EXISTS, so they are
// new) and dropped afterwards with everything in them.
func postgresSpace(ctx context.Context, cfg *Config, choice storeChoice, id string) (*scratchSpace, error) {
	schema := "verify_" + id
	schemas := []string{schema, schema + "_newer"}
	for _, s := range schemas {
		if err := pgstore.ValidateSchema(s); err != nil {
			return nil, fmt.Errorf("verify: scratch schema: %w", err)
		}
	}
	exec := func(ctx context.Context, sql string) (reached bool, err error) {
		conn, err := connectPostgres(ctx, cfg.Store.PostgresURL)
		if err != nil {
			return false, err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		_, err = conn.Exec(ctx, sql)
		return true, err
	}
	reachCtx, cancel := context.WithTimeout(ctx, storeReachTimeout)
	defer cancel()
	switch reached, err := exec(reachCtx, "CREATE SCHEMA "+schemas[0]+"; CREATE SCHEMA "+schemas[1]); {
	case !reached:
		return nil, fmt.Errorf("verify: store %s does not answer: %w", choice.desc, err)
	case err != nil:
		return nil, fmt.Errorf("verify: store %s: creating the scratch schema %s: %w", choice.desc, schema, err)
	}
	return &scratchSpace{kind: choice.kind,
		cfg:   withStore(cfg, func(s *StoreConfig) { s.PostgresSchema = schemas[0] }),
		newer: withStore(cfg, func(s *StoreConfig) { s.PostgresSchema = schemas[1] }),
		desc:  strings.TrimSuffix(choice.desc, " schema "+orString(cfg.Store.PostgresSchema, pgstore.DefaultSchema)) + " schema " + schema,
		remove: func(ctx context.Context) error {
			if _, err := exec(ctx, "DROP SCHEMA IF EXISTS "+schemas[0]+" CASCADE; DROP SCHEMA IF EXISTS "+schemas[1]+" CASCADE"); err != nil {
				return fmt.Errorf("verify: removing the scratch schemas %s and %s of %s: %w", schemas[0], schemas[1], choice.desc, err)
			}
			return nil
		},
	}, nil
}

// connectPostgres opens one connection to the database at rawURL; its
// errors never quote the URL.
func connectPostgres(ctx context.Context, rawURL string) (*pgx.Conn, error) {
	pc, err := pgstore.PoolConfig(rawURL)
	if err != nil {
		return nil, err
	}
	conn, err := pgx.ConnectConfig(ctx, pc.ConnConfig)
	if err != nil && pc.ConnConfig.Password != "" && strings.Contains(err.Error(), pc.ConnConfig.Password) {
		return nil, errors.New(strings.ReplaceAll(err.Error(), pc.ConnConfig.Password, "xxxxx"))
	}
	return conn, err
}
