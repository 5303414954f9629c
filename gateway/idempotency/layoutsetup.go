package idempotency

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// LayoutSetUp brings a shared store's layout to the version this gateway
// writes, once, at the first operation that needs it: a store that did not
// answer at start is set up when it does, and after the first success a
// check costs one atomic load. The PostgreSQL and Redis stores each keep
// one; the embedded store sets its file up when it opens it.
type LayoutSetUp struct {
	store     string
	writes    int
	noMigrate bool
	read      func(context.Context) (int, error)
	migrate   func(context.Context) error

	mu   sync.Mutex
	done atomic.Bool
}

// NewLayoutSetUp returns the set-up of a store named store (for messages)
// whose gateway writes version writes: migrate raises the stored version
// (and waits for older gateways, [WaitForOlderGateways]); with noMigrate
// (store.migrate: false) nothing is changed and read reads the stored
// version, which must not be behind ([LayoutBehind]).
func NewLayoutSetUp(store string, writes int, noMigrate bool, read func(context.Context) (int, error), migrate func(context.Context) error) *LayoutSetUp {
	return &LayoutSetUp{store: store, writes: writes, noMigrate: noMigrate, read: read, migrate: migrate}
}

// Ensure sets the layout up unless that was done; concurrent callers wait
// for the one setting it up.
func (u *LayoutSetUp) Ensure(ctx context.Context) error {
	if u.done.Load() {
		return nil
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.done.Load() {
		return nil
	}
	if u.noMigrate {
		found, err := u.read(ctx)
		if err != nil {
			return fmt.Errorf("read the %s store's layout version: %w", u.store, err)
		}
		if err := LayoutBehind(found, u.writes); err != nil {
			return fmt.Errorf("%s store: %w", u.store, err)
		}
	} else if err := u.migrate(ctx); err != nil {
		return err
	}
	u.done.Store(true)
	return nil
}

// LayoutBehind is the error ([ErrLayoutBehind]) for a store whose layout
// version found is older than the version writes this gateway writes; nil
// when it is not.
func LayoutBehind(found, writes int) error {
	if found >= writes {
		return nil
	}
	return fmt.Errorf("layout version %d, this gateway writes %d: %w; run `gateway migrate`", found, writes, ErrLayoutBehind)
}
