package boltstore

import (
	"context"
	"fmt"
	"strconv"

	bolt "go.etcd.io/bbolt"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// The layout version of the file: the buckets, their keys and the record
// encoding. It lives in the meta bucket under "layout" (decimal text), and
// every transaction reads it (newTxn), so a file written by a newer
// gateway is never decided on.
const (
	// layoutVersion is the layout this code writes.
	// Version 2 keeps an open record's canonical arguments (field "a").
	// Version 3 adds approval records (field "ap", states
	// AWAITING_APPROVAL, APPROVED, DENIED) and the approvals bucket.
	// Version 4 adds effect reservations: the effects bucket and field
	// "ef" (a file at 3 lacks the bucket, so it must be set up again).
	// Version 5 adds budget reservations: the budgets bucket and field
	// "bg" (a file at 4 lacks the bucket, so it must be set up again).
	layoutVersion = 5
	// newestKnownLayout is the newest layout this code reads.
	newestKnownLayout = layoutVersion
)

var (
	// metaBucket holds the file's layout version.
	metaBucket = []byte("meta")
	layoutKey  = []byte("layout")
)

// storeKind names this store in layout errors.
const storeKind = "embedded"

// readLayout returns the file's layout version; 0 when none is recorded
// (a new file).
func readLayout(tx *bolt.Tx) (int, error) {
	meta := tx.Bucket(metaBucket)
	if meta == nil {
		return 0, nil
	}
	raw := meta.Get(layoutKey)
	if raw == nil {
		return 0, nil
	}
	v, err := strconv.Atoi(string(raw))
	if err != nil {
		return 0, fmt.Errorf("boltstore: layout version %q is not a number", raw)
	}
	return v, nil
}

// checkLayout refuses a file whose layout this code does not know, and
// one that is behind (opened with Options.NoMigrate).
func checkLayout(tx *bolt.Tx) error {
	found, err := readLayout(tx)
	if err != nil {
		return err
	}
	if err := idempotency.LayoutBehind(found, layoutVersion); err != nil {
		return fmt.Errorf("boltstore: %w", err)
	}
	return idempotency.LayoutVersion{Found: found, Known: newestKnownLayout}.Check(storeKind)
}

// setUp creates the buckets and records layoutVersion, unless the file
// already holds it or a newer one. It reports the version found before.
// With migrate off it changes nothing: every transaction on a file that is
// behind then fails (checkLayout) until `gateway migrate` upgrades it.
func setUp(tx *bolt.Tx, migrate bool) (int, error) {
	found, err := readLayout(tx)
	if err != nil || found >= layoutVersion || !migrate {
		return found, err
	}
	for _, name := range [][]byte{recordsBucket, stepsBucket, fencingBucket, approvalsBucket, effectsBucket, budgetsBucket, metaBucket} {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return found, fmt.Errorf("create bucket %s: %w", name, err)
		}
	}
	if err := tx.Bucket(metaBucket).Put(layoutKey, []byte(strconv.Itoa(layoutVersion))); err != nil {
		return found, fmt.Errorf("record layout version: %w", err)
	}
	return found, nil
}

// LayoutVersion reads the file's layout version.
func (s *Store) LayoutVersion(ctx context.Context) (idempotency.LayoutVersion, error) {
	v := idempotency.LayoutVersion{Writes: layoutVersion, Known: newestKnownLayout}
	if err := ctx.Err(); err != nil {
		return v, err
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		v.Found, err = readLayout(tx)
		return err
	})
	return v, err
}

// Migrate records this gateway's layout in the file (the buckets included)
// unless it is current or newer, and returns the versions before and after.
func (s *Store) Migrate(ctx context.Context) (before, after idempotency.LayoutVersion, err error) {
	return idempotency.MigrateWith(ctx, s, func(ctx context.Context) error {
		if err := s.update(ctx, func(tx *bolt.Tx) error { _, err := setUp(tx, true); return err }); err != nil {
			return fmt.Errorf("boltstore: migrate: %w", err)
		}
		return nil
	})
}

// MigrationPlan says what Migrate would write.
func (s *Store) MigrationPlan(ctx context.Context) (string, error) {
	v, err := s.LayoutVersion(ctx)
	if err != nil {
		return "", err
	}
	if v.Found >= layoutVersion {
		return fmt.Sprintf("nothing to do: the file's layout version is %d", v.Found), nil
	}
	return fmt.Sprintf("create buckets records, steps, fencing, approvals, effects, budgets, meta if missing; set meta/layout = %d (now %d)", layoutVersion, v.Found), nil
}
