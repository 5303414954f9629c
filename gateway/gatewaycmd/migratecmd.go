package gatewaycmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

const migrateUsage = "-config FILE [-print]"

// migrateTimeout bounds the whole migration (connecting, the advisory
// lock PostgreSQL replicas take, the wait for older gateways).
const migrateTimeout = 2 * time.Minute

// migrates reports whether start-up may create or upgrade the store's
// schema or layout (store.migrate, default true).
func (s StoreConfig) migrates() bool {
	return s.Migrate == nil || *s.Migrate
}

// refuseBehindLayout stops a start-up with store.migrate: false on a store
// whose layout is older than this gateway writes, in one line naming
// `gateway migrate`. A store that does not answer yet is not refused here
// (openStore warns about it): its operations refuse the old layout until
// it is migrated (503).
func (c *Config) refuseBehindLayout(ctx context.Context, store idempotency.Store, desc string) error {
	if c.Store.migrates() {
		return nil
	}
	layouts, ok := store.(idempotency.Layouts)
	if !ok {
		return nil
	}
	readCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	v, err := layouts.LayoutVersion(readCtx)
	if err != nil {
		return nil
	}
	if v.Found < v.Writes {
		_ = store.Close()
		return fmt.Errorf("store %s: layout version %d, this gateway writes %d, and store.migrate is false: run `gateway migrate -config FILE` first", desc, v.Found, v.Writes)
	}
	return nil
}

// runMigrate applies this version's schema or layout change to the
// configured store (or with -print says what it would do) and prints the
// versions before and after.
func runMigrate(ctx context.Context, inv invocation) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	configPath := fs.String("config", "", "path to the config file (required)")
	printOnly := fs.Bool("print", false, "print what would change (the SQL for PostgreSQL, the version key for Redis and the embedded store) and change nothing")
	if err := parseFlags(fs, inv, "migrate", migrateUsage); err != nil {
		return helpIsSuccess(err)
	}
	if *configPath == "" || fs.NArg() > 0 {
		return fmt.Errorf("migrate: want -config FILE (usage: gateway migrate %s)", migrateUsage)
	}
	cfg, _, err := loadConfig(*configPath, inv.getenv)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	// Open without changing anything: this command decides.
	cfg.Store.Migrate = new(bool)
	ctx, cancel := context.WithTimeout(ctx, migrateTimeout)
	defer cancel()
	store, desc, err := cfg.openStoreAnyLayout(ctx, slog.New(slog.DiscardHandler))
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer store.Close()
	m, ok := store.(idempotency.Migrator)
	if !ok {
		return fmt.Errorf("migrate: store %s has no layout to migrate", desc)
	}
	if *printOnly {
		v, err := m.LayoutVersion(ctx)
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		plan, err := m.MigrationPlan(ctx)
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		_, err = fmt.Fprintf(inv.stdout, "store %s\nlayout version %d, this gateway writes %d\n%s\n", desc, v.Found, v.Writes, plan)
		return err
	}
	before, after, err := m.Migrate(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := after.Check(""); errors.Is(err, idempotency.ErrNewerLayout) {
		_, err := fmt.Fprintf(inv.stdout, "store %s\nlayout version %d is newer than this gateway's %d: nothing changed; upgrade the gateway\n", desc, after.Found, after.Known)
		return err
	}
	_, err = fmt.Fprintf(inv.stdout, "store %s\nlayout version before: %d\nlayout version after:  %d\n", desc, before.Found, after.Found)
	return err
}
