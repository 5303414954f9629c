// Package boltstore is the embedded idempotency store: one bbolt file, used
// by a single gateway process when no Redis is configured. Every Store
// method is one bbolt transaction, so a lookup and the write it decides on
// can never be interleaved with another request's.
//
// bbolt serialises write transactions and fsyncs each commit: a first call
// costs two fsyncs (Claim and Complete), while a replay reads under the
// writer lock and commits nothing. A context is checked before a
// transaction starts; waiting for the writer lock cannot be cancelled.
package boltstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// defaultSweepInterval is how often expired records are removed when
// Options.SweepInterval is zero.
const defaultSweepInterval = time.Minute

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
}

// Store is an idempotency.Store backed by a bbolt file.
type Store struct {
	db  *bolt.DB
	now func() time.Time

	stopSweeper context.CancelFunc
	sweeperDone chan struct{}
	closeOnce   sync.Once
	closeErr    error
}

var _ idempotency.Store = (*Store)(nil)

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
		for _, name := range [][]byte{recordsBucket, stepsBucket, fencingBucket} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return fmt.Errorf("create bucket %s: %w", name, err)
			}
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("boltstore: initialise %s: %w", path, err)
	}

	s := &Store{db: db, now: opts.Now, sweeperDone: make(chan struct{})}
	if s.now == nil {
		s.now = time.Now
	}
	interval := opts.SweepInterval
	if interval == 0 {
		interval = defaultSweepInterval
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.stopSweeper = cancel
	if interval > 0 {
		go s.sweepEvery(ctx, interval)
	} else {
		close(s.sweeperDone)
	}
	return s, nil
}

// Close stops the sweeper and closes the file. It is safe to call twice.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.stopSweeper()
		<-s.sweeperDone
		if err := s.db.Close(); err != nil {
			s.closeErr = fmt.Errorf("boltstore: close: %w", err)
		}
	})
	return s.closeErr
}

// Ping reports whether the file is open and readable.
func (s *Store) Ping(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(recordsBucket) == nil {
			return errors.New("records bucket missing")
		}
		return nil
	}); err != nil {
		return fmt.Errorf("boltstore: ping: %w", err)
	}
	return nil
}

// update runs fn in one write transaction. fn reports whether it wrote
// anything: a transaction that only read (a replay, an in-progress answer)
// is rolled back instead of committed, because bbolt's commit always
// rewrites the meta page and fsyncs even when nothing changed. Holding the
// writer lock for the read keeps lookup and decision atomic either way.
func (s *Store) update(ctx context.Context, fn func(tx *bolt.Tx) (changed bool, err error)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	tx, err := s.db.Begin(true)
	if err != nil {
		return fmt.Errorf("begin write transaction: %w", err)
	}
	// Rolling back a committed transaction is a no-op; this also releases
	// the writer lock if fn panics.
	defer func() { _ = tx.Rollback() }()
	changed, err := fn(tx)
	if err != nil || !changed {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}
