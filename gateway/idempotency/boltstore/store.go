// Package boltstore is the embedded idempotency store: one bbolt file, used
// by a single gateway process when no Redis is configured. Every Store
// method is one bbolt transaction, so a lookup and the write it decides on
// can never be interleaved with another request's.
//
// bbolt serialises write transactions and fsyncs each commit. Writes of
// concurrent requests share one (group commit, see Store.write): a first
// call's Claim and Complete each join a batch. Answers that write nothing
// (a replay, "in progress", a reused key) are taken from a read-only
// snapshot of synced data and commit nothing. A context is checked before a
// transaction starts; waiting for a commit cannot be cancelled.
package boltstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// defaultSweepInterval is how often expired records are removed when
// Options.SweepInterval is zero.
const defaultSweepInterval = time.Minute

// defaultBatchDelay is the longest a write waits for concurrent writes to
// join its commit. About one fsync on an SSD: writes that arrive while a
// commit is syncing gather into the next one, and a lone write waits at
// most this long.
const defaultBatchDelay = time.Millisecond

// openLockTimeout bounds the wait for the file lock, so a second process
// opening the same file fails instead of hanging forever.
const openLockTimeout = 5 * time.Second

// Options tunes a Store.
type Options struct {
	// SweepInterval is how often the background sweeper deletes expired
	// records and their step entries. Zero means one minute; a negative
	// value disables the sweeper (Sweep can still be called).
	SweepInterval time.Duration
	// Now is the clock; nil means time.Now. Tests inject a fake clock.
	Now func() time.Time
	// BatchDelay is how long a write waits for others to share its commit
	// and fsync (bbolt's MaxBatchDelay). Zero means defaultBatchDelay.
	BatchDelay time.Duration
	// NoMigrate stops Open from creating or upgrading the file's layout
	// (store.migrate: false): on a file that is behind every operation
	// fails with idempotency.ErrLayoutBehind until `gateway migrate` (the
	// store's Migrate) upgrades it.
	NoMigrate bool
	// ReceiptOutbox makes each completion also record its execution's
	// receipt as pending (receipts on; see idempotency.ReceiptOutbox).
	// Open creates the outbox bucket; off, completions write none.
	ReceiptOutbox bool
}

// Store is an idempotency.Store backed by a bbolt file.
type Store struct {
	db  *bolt.DB
	now func() time.Time

	sweeper   *idempotency.Sweeper
	closeOnce sync.Once
	closeErr  error

	// durableTxID is the id of the last write transaction known to be
	// committed and fsynced (see readDurable).
	durableTxID atomic.Int64
}

var (
	_ idempotency.Store    = (*Store)(nil)
	_ idempotency.Migrator = (*Store)(nil)
)

// Open opens (creating it and its parent directories if needed) the store
// file at path and starts the sweeper. bbolt fsyncs every commit, so a
// completed record survives a crash of the process.
func Open(path string, opts Options) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("boltstore: create directory for %s: %w", path, err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: openLockTimeout})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("boltstore: open %s: another process (a second gateway?) holds this file; the embedded store serves one process only (use Redis or PostgreSQL for several replicas): %w", path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if _, err := setUp(tx, !opts.NoMigrate); err != nil || !opts.ReceiptOutbox {
			return err
		}
		// Only in a file of this layout: a file that is behind stays as
		// it is until it is migrated.
		if v, err := readLayout(tx); err != nil || v != layoutVersion {
			return err
		}
		_, err := tx.CreateBucketIfNotExists(outboxBucket)
		return err
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("boltstore: initialise %s: %w", path, err)
	}

	s := &Store{db: db, now: opts.Now}
	if opts.BatchDelay > 0 {
		db.MaxBatchDelay = opts.BatchDelay
	} else {
		db.MaxBatchDelay = defaultBatchDelay
	}
	// Everything in the file now was committed and synced by Update above.
	if err := db.View(func(tx *bolt.Tx) error { s.markDurable(tx.ID()); return nil }); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("boltstore: read %s: %w", path, err)
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.sweeper = idempotency.StartSweeper(opts.SweepInterval, defaultSweepInterval, s.sweepInBackground)
	return s, nil
}

// Close stops the sweeper and closes the file. It is safe to call twice.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.sweeper.Stop()
		if err := s.db.Close(); err != nil {
			s.closeErr = fmt.Errorf("boltstore: close: %w", err)
		}
	})
	return s.closeErr
}

// Ping reports whether the file is open and readable, in a layout this
// code knows.
func (s *Store) Ping(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.db.View(func(tx *bolt.Tx) error {
		_, err := newTxn(tx, s.now())
		return err
	}); err != nil {
		return fmt.Errorf("boltstore: ping: %w", err)
	}
	return nil
}

// write runs fn in a write transaction that bbolt may share with other
// concurrent writes (DB.Batch: one commit, one fsync for all of them), and
// returns once that commit is on disk. It is the group commit that lets
// concurrent claims and completions share an fsync instead of queueing for
// one each.
//
// Batch may run fn more than once (when another function of the batch
// fails, the rest are re-run in a new transaction), so fn must set its
// results afresh on every run and have no effect outside tx. fn returns an
// error only for a failure of the store; an answer such as ErrLeaseLost is
// a result to capture, not an error, or it would roll back the others'
// writes and be re-run alone.
func (s *Store) write(ctx context.Context, fn func(t *txn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var txID int
	err := s.db.Batch(func(tx *bolt.Tx) error {
		t, err := newTxn(tx, s.now())
		if err != nil {
			return err
		}
		txID = tx.ID()
		return fn(t)
	})
	if err != nil {
		return err
	}
	s.markDurable(txID)
	return nil
}

// update runs fn alone in one write transaction, for writes that must not
// be re-run (the sweeper counts what it removed).
func (s *Store) update(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var txID int
	err := s.db.Update(func(tx *bolt.Tx) error {
		txID = tx.ID()
		return fn(tx)
	})
	if err != nil {
		return err
	}
	s.markDurable(txID)
	return nil
}

// markDurable records that the write transaction txID, and so every one
// before it, has been committed and fsynced.
func (s *Store) markDurable(txID int) {
	for {
		old := s.durableTxID.Load()
		if int64(txID) <= old || s.durableTxID.CompareAndSwap(old, int64(txID)) {
			return
		}
	}
}

// readDurable runs fn on a read-only snapshot if everything the snapshot
// holds is known to be on disk, and reports whether it did. bbolt makes a
// commit visible to readers before its fsync returns; a snapshot newer than
// the last commit known to be synced is not used, so no answer is ever
// given from a record a crash could still lose.
func (s *Store) readDurable(fn func(t *txn) error) (bool, error) {
	tx, err := s.db.Begin(false)
	if err != nil {
		return false, fmt.Errorf("begin read transaction: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if int64(tx.ID()) > s.durableTxID.Load() {
		return false, nil
	}
	t, err := newTxn(tx, s.now())
	if err != nil {
		return false, err
	}
	return true, fn(t)
}

// DB is the store's bbolt database, for what lives beside the records in
// the same file (the receipts of package boltreceipts): bbolt locks its
// file, so the gateway opens it once.
func (s *Store) DB() *bolt.DB { return s.db }
