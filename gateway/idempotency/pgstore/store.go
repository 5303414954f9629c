// Package pgstore is the durable shared idempotency.Store: records in
// PostgreSQL (pgx v5), shared by any number of gateway replicas, surviving
// a crash of the database itself once committed.
//
// Every decision is one round trip: a claim is one call of the claim
// function the store installs (it looks the record and the step up, decides
// and writes under row locks); renew, complete and release are one
// owner-checked statement each. Leases are measured on the database's
// clock. The schema (tables, sequence, function) is created or upgraded at
// start under an advisory lock; a sweep, safe to run on every replica at
// once, deletes expired rows in bounded batches. Limiter keeps the tenants'
// rate limits and in-flight slots in the same schema (limits.go).
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// DefaultSchema is the PostgreSQL schema the store works in unless Options
// says otherwise.
const DefaultSchema = "toolgateway"

// Defaults of the sweep.
const (
	DefaultSweepInterval = time.Minute
	DefaultSweepBatch    = 1000
)

// DefaultMaxConns is the connection pool's size when the URL does not set
// pool_max_conns. pgxpool's own default (the number of CPUs, at least 4)
// starves a gateway: a fresh call waits for two commits (claim and
// completion), each a WAL flush, and only concurrent connections let the
// server flush many commits at once. Measured on 2 cores with 16 clients:
// 4 connections ≈ 330 fresh calls/s, 16 ≈ 650, 32 ≈ 840 (docs/reliability.md).
const DefaultMaxConns = 16

// Options configures a Store.
type Options struct {
	// Schema is the PostgreSQL schema of the store's tables and function
	// (default "toolgateway"), created if missing. Gateways sharing records
	// share a schema; tests use one of their own.
	Schema string
	// SweepInterval is how often expired rows are deleted (default one
	// minute; negative: no background sweep, Sweep can still be called).
	SweepInterval time.Duration
	// SweepBatch bounds the rows one sweep statement deletes (default 1000),
	// so a sweep never holds many row locks or a long transaction.
	SweepBatch int
	// NoMigrate stops the store from creating or upgrading its schema
	// (store.migrate: false): a schema that is behind is refused with
	// idempotency.ErrLayoutBehind, and `gateway migrate` upgrades it.
	NoMigrate bool
	// ReceiptOutbox makes each completion also record its execution's
	// receipt as pending (receipts on; see idempotency.ReceiptOutbox).
	ReceiptOutbox bool
}

// Store is an idempotency.Store on PostgreSQL. It is safe for concurrent use.
type Store struct {
	pool       *pgxpool.Pool
	ownsPool   bool
	schema     string
	sql        statements
	sweepBatch int
	// receiptOutbox: completions write their outbox entry (outbox.go).
	receiptOutbox bool

	// layout makes the schema current before the first operation (with
	// NoMigrate: checks that it is).
	layout *idempotency.LayoutSetUp
	// guard refuses every operation on a schema newer than this code
	// knows (layout.go).
	guard *idempotency.LayoutGuard

	sweeper   *idempotency.Sweeper
	closeOnce sync.Once

	// pinsTable: tool_pins was created (pins.go).
	pinsTable pinsTable
}

var (
	_ idempotency.Store    = (*Store)(nil)
	_ idempotency.TxStore  = (*Store)(nil)
	_ idempotency.Migrator = (*Store)(nil)
)

// New creates or upgrades the schema on pool and returns a Store that uses
// it. The caller keeps ownership of pool (Close does not close it). If the
// database does not answer, New still returns the Store, which migrates on
// first use (its operations fail until then); a database that answers and
// refuses (missing rights; with NoMigrate, a schema that is behind) is an
// error. On a schema newer than this code it starts and decides nothing.
// With NoMigrate it changes nothing; a schema that is behind is refused by
// every operation until Migrate upgrades it.
func New(ctx context.Context, pool *pgxpool.Pool, opts Options) (*Store, error) {
	if opts.Schema == "" {
		opts.Schema = DefaultSchema
	}
	if err := ValidateSchema(opts.Schema); err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	s := &Store{
		pool:       pool,
		schema:     opts.Schema,
		sql:        newStatements(opts.Schema),
		sweepBatch: opts.SweepBatch, receiptOutbox: opts.ReceiptOutbox,
	}
	s.guard = idempotency.NewLayoutGuard(storeKind, currentVersion, s.readVersion)
	s.layout = idempotency.NewLayoutSetUp(storeKind, currentVersion, opts.NoMigrate, s.readVersion, func(ctx context.Context) error {
		_, err := s.migrateAndWait(ctx)
		return err
	})
	if s.sweepBatch <= 0 {
		s.sweepBatch = DefaultSweepBatch
	}
	// A database that does not answer yet is not fatal: every operation
	// first tries the migration again (and fails with a store error, a 503,
	// until it succeeds). A database that answers and refuses the schema
	// is: that needs a human.
	// A newer schema is not fatal either: the store starts and refuses
	// every decision (the layout guard), so /readyz names both versions.
	// With NoMigrate a schema that is behind is not fatal here: operations
	// refuse it (ErrLayoutBehind), and the caller decides (start-up exits
	// naming `gateway migrate`, which runs Migrate on this store).
	if err := s.setUp(ctx); err != nil && !IsConnectionError(err) && !errors.Is(err, idempotency.ErrLayoutBehind) {
		return nil, err
	}
	// A failed sweep (the database is down) is tried again at the next tick.
	s.sweeper = idempotency.StartSweeper(opts.SweepInterval, DefaultSweepInterval, func(ctx context.Context) { _, _ = s.Sweep(ctx) })
	return s, nil
}

// Open connects to the database at url (a postgres:// URL or a key=value
// connection string, as pgx parses it, pool_max_conns and the other pgxpool
// settings included), creates or upgrades the schema and returns a Store
// that owns its connection pool (DefaultMaxConns connections unless the
// URL says otherwise).
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	cfg, err := PoolConfig(url)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: connect: %w", err)
	}
	s, err := New(ctx, pool, opts)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.ownsPool = true
	return s, nil
}

// PoolConfig parses url as Open does — a postgres:// URL or a key=value
// connection string, pool_max_conns and the other pgxpool settings
// included — with DefaultMaxConns unless the URL sets pool_max_conns. Its
// error never quotes the URL (which may hold a password). Programs that
// open their own pool on the store's database (examples/orders) use it so
// that every URL the gateway accepts works for them too.
func PoolConfig(url string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx's parse errors may quote the URL, password included.
		return nil, errors.New("pgstore: cannot parse the connection URL (want postgres://user@host:port/database)")
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = DefaultMaxConns
	}
	return cfg, nil
}

// ready makes sure the schema is current (after the first success that
// costs nothing) and that no newer gateway moved it since (the layout
// guard: one read of the version per idempotency.LayoutRefresh).
func (s *Store) ready(ctx context.Context) error {
	if err := s.setUp(ctx); err != nil {
		return err
	}
	if err := s.guard.Check(ctx); err != nil {
		return fmt.Errorf("pgstore: schema %s: %w", s.schema, err)
	}
	return nil
}

func (s *Store) setUp(ctx context.Context) error {
	if err := s.layout.Ensure(ctx); err != nil {
		return fmt.Errorf("pgstore: schema %s: %w", s.schema, err)
	}
	return nil
}

// IsConnectionError reports whether err is the database not answering or
// not serving yet (rather than refusing: a newer schema, missing rights).
// The first is no reason to stop a program at start (it is retried); the
// second is.
func IsConnectionError(err error) bool {
	if errors.Is(err, idempotency.ErrNewerLayout) || errors.Is(err, idempotency.ErrLayoutBehind) {
		return false
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true // includes "the database system is starting up"
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// 08: connection exception; 53: insufficient resources (too many
		// connections); 57P: shutting down, crash recovery, starting up.
		return strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "53") || strings.HasPrefix(pgErr.Code, "57P")
	}
	return true // network errors, timeouts
}

// Schema returns the PostgreSQL schema the store works in.
func (s *Store) Schema() string { return s.schema }

// Ping reports whether the database answers and the schema is in place.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.ready(ctx); err != nil {
		return fmt.Errorf("pgstore: ping: %w", err)
	}
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("pgstore: ping: %w", err)
	}
	return nil
}

// Close stops the sweeper and, for a store made by Open, closes the pool.
// It is safe to call twice.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.sweeper.Stop()
		if s.ownsPool {
			s.pool.Close()
		}
	})
	return nil
}

// micros converts a duration for the SQL side, which counts microseconds.
func micros(d time.Duration) int64 { return d.Microseconds() }

// stepIndex converts a step index for a bigint column.
func stepIndex(step idempotency.Step) (int64, error) {
	if step.Index > math.MaxInt64 {
		return 0, fmt.Errorf("step index %d is out of range", step.Index)
	}
	return int64(step.Index), nil
}

// Pool is the store's connection pool, for what lives beside the records
// in the same database and schema (the receipts of package pgreceipts).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }
