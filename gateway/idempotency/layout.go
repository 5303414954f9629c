package idempotency

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Every store records the version of its data layout (the record format,
// the key names, the SQL schema) where every gateway sharing it can read
// it. A gateway that finds a version newer than the newest it can read
// decides nothing on that store: each operation answers a *LayoutError
// (the call path's 503 store_unavailable) and Ping fails with it
// (/readyz 503 naming both versions). So during a rolling update an old
// replica refuses calls instead of misreading records written by a new
// one and running a call a second time.

// ErrNewerLayout is what a *LayoutError matches with errors.Is.
var ErrNewerLayout = errors.New("idempotency: store layout newer than this gateway knows")

// ErrLayoutBehind: the store's layout is older than the one this gateway
// writes and the gateway was told not to change it (store.migrate: false);
// `gateway migrate` upgrades it.
var ErrLayoutBehind = errors.New("idempotency: store layout older than this gateway writes")

// LayoutError names the versions of a store layout this gateway cannot read.
type LayoutError struct {
	// Store names the store kind ("redis", "postgres", "embedded").
	Store string
	// Found is the version the store holds; Known is the newest this
	// gateway reads.
	Found, Known int
}

// Error names both versions, so /readyz and the logs say what to upgrade.
func (e *LayoutError) Error() string {
	return fmt.Sprintf("%s store layout version %d, this gateway knows up to %d: a newer gateway changed the store; upgrade this one", e.Store, e.Found, e.Known)
}

// Is makes errors.Is(err, ErrNewerLayout) true.
func (e *LayoutError) Is(target error) bool { return target == ErrNewerLayout }

// LayoutVersion describes a store's layout as one gateway sees it.
type LayoutVersion struct {
	// Found is the version the store holds (0: none recorded yet, an empty
	// store).
	Found int
	// Writes is the version this gateway writes (what `gateway migrate`
	// moves the store to).
	Writes int
	// Known is the newest version this gateway reads (Writes, or one more
	// in the first release of a two-release layout change).
	Known int
}

// Check is the verdict on the found version: a *LayoutError when it is
// newer than Known.
func (v LayoutVersion) Check(store string) error {
	if v.Found > v.Known {
		return &LayoutError{Store: store, Found: v.Found, Known: v.Known}
	}
	return nil
}

// Layouts is implemented by the stores that record a layout version (all
// of this module's): `gateway check -dial` and `gateway migrate` report it.
type Layouts interface {
	// LayoutVersion reads the store's layout version.
	LayoutVersion(ctx context.Context) (LayoutVersion, error)
}

// Migrator is implemented by the stores whose layout `gateway migrate`
// moves: Migrate applies this gateway's layout (nothing when current) and
// returns the versions before and after; MigrationPlan says what Migrate
// would do, without doing it (SQL for PostgreSQL, the version key for
// Redis and bbolt).
type Migrator interface {
	Layouts
	Migrate(ctx context.Context) (before, after LayoutVersion, err error)
	MigrationPlan(ctx context.Context) (string, error)
}

// LayoutRefresh is how often a shared store's layout version is read
// again (at most; on demand, by the first operation after it ran out). A
// gateway that raised the version waits twice this long before deciding
// anything, so every older gateway has seen the new version by then.
const LayoutRefresh = time.Second

// LayoutGuard keeps a shared store's operations off a layout this gateway
// does not know. Check costs a mutex while the last reading is fresh, and
// one read of the version (one round trip) per LayoutRefresh: the caller
// that finds the reading stale reads it, while the others go on with the
// previous verdict until that read lands (so a slow read delays one
// operation, not all of them).
type LayoutGuard struct {
	store string
	known int
	read  func(ctx context.Context) (int, error)

	mu         sync.Mutex
	checked    time.Time
	verdict    error
	refreshing bool
}

// NewLayoutGuard returns a guard for a store named store (for messages)
// whose readable versions go up to known; read reads the stored version.
func NewLayoutGuard(store string, known int, read func(ctx context.Context) (int, error)) *LayoutGuard {
	return &LayoutGuard{store: store, known: known, read: read}
}

// Check returns nil when the store's layout was, at most LayoutRefresh ago
// (plus one read in flight), one this gateway knows; else the
// *LayoutError, or the error of reading the version (the store does not
// answer: no decision either).
func (g *LayoutGuard) Check(ctx context.Context) error {
	g.mu.Lock()
	fresh := !g.checked.IsZero() && time.Since(g.checked) < LayoutRefresh
	if fresh || (g.refreshing && !g.checked.IsZero()) {
		verdict := g.verdict
		g.mu.Unlock()
		return verdict
	}
	g.refreshing = true
	g.mu.Unlock()

	found, err := g.read(ctx)

	g.mu.Lock()
	defer g.mu.Unlock()
	g.refreshing = false
	if err != nil {
		return fmt.Errorf("read the %s store's layout version: %w", g.store, err)
	}
	g.checked = time.Now()
	g.verdict = LayoutVersion{Found: found, Known: g.known}.Check(g.store)
	return g.verdict
}

// WaitForOlderGateways is what a gateway that just raised a shared store's
// layout from found to raised does before deciding anything: it waits until
// every gateway that knew only found has read the new version
// (2 × LayoutRefresh), or ctx ends. A new store (found 0) or one already
// at raised has no older gateways to wait for.
func WaitForOlderGateways(ctx context.Context, found, raised int) error {
	if found < 1 || found >= raised {
		return nil
	}
	t := time.NewTimer(2 * LayoutRefresh)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// MigrateWith is the body of every store's Migrate: it reads the version,
// applies this gateway's layout with apply, and reads it again, so that
// `gateway migrate` reports what it found and what it left.
func MigrateWith(ctx context.Context, store Layouts, apply func(context.Context) error) (before, after LayoutVersion, err error) {
	before, err = store.LayoutVersion(ctx)
	if err != nil {
		return before, before, err
	}
	if err := apply(ctx); err != nil {
		return before, before, err
	}
	after, err = store.LayoutVersion(ctx)
	return before, after, err
}
