package idempotency_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// TestLayoutSetUpMigratesOnceAfterAFailure: a failed migration (the store
// does not answer yet) is tried again by the next operation; once it
// succeeded, no caller migrates again, however many there are at once.
func TestLayoutSetUpMigratesOnceAfterAFailure(t *testing.T) {
	var migrations atomic.Int64
	down := errors.New("connection refused")
	u := idempotency.NewLayoutSetUp("test", 3, false, nil, func(context.Context) error {
		if migrations.Add(1) == 1 {
			return down
		}
		return nil
	})
	if err := u.Ensure(t.Context()); !errors.Is(err, down) {
		t.Fatalf("first Ensure = %v, want the migration's error", err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if err := u.Ensure(t.Context()); err != nil {
				t.Errorf("Ensure after the store came up: %v", err)
			}
		})
	}
	wg.Wait()
	if n := migrations.Load(); n != 2 {
		t.Fatalf("%d migrations, want 2 (the failed one and one success)", n)
	}
}

// TestLayoutSetUpWithoutMigrateRefusesALayoutBehind: with noMigrate the
// set-up never migrates; a version behind is ErrLayoutBehind (every time:
// `gateway migrate` may upgrade it meanwhile), a current one passes.
func TestLayoutSetUpWithoutMigrateRefusesALayoutBehind(t *testing.T) {
	found := 2
	migrate := func(context.Context) error { t.Error("migrated with noMigrate"); return nil }
	u := idempotency.NewLayoutSetUp("test", 3, true, func(context.Context) (int, error) { return found, nil }, migrate)
	for range 2 {
		if err := u.Ensure(t.Context()); !errors.Is(err, idempotency.ErrLayoutBehind) {
			t.Fatalf("Ensure on version 2 of 3 = %v, want ErrLayoutBehind", err)
		}
	}
	found = 3
	if err := u.Ensure(t.Context()); err != nil {
		t.Fatalf("Ensure once migrated: %v", err)
	}
	if err := idempotency.LayoutBehind(4, 3); err != nil {
		t.Fatalf("LayoutBehind(newer) = %v, want nil (the guard judges newer layouts)", err)
	}
}
