package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// The layout version: the key names, the record value's format (claim.lua)
// and the step entries. It lives in one key, <prefix>layout (decimal
// text). On Redis Cluster that key sits in whatever slot its name hashes
// to, and a script may touch only its record's slot, so the scripts do
// not read it: every gateway reads it at most once per
// idempotency.LayoutRefresh (idempotency.LayoutGuard), and a gateway that
// raised it waits two refreshes before deciding anything, by which time
// every older gateway has read it and refuses.
const (
	// layoutVersion is the layout this code writes.
	// Version 2 keeps an open record's canonical arguments (claim.lua).
	// Version 3 adds approval records (states 'A', 'Y', 'N' with their
	// APPROVAL block) and the approval index keys; before its release it
	// also changed in place to untagged record names on a single Redis and
	// a record's step index instead of its step key's name (keys.go), so a
	// store written by a pre-release build of 3 is not read by this one.
	layoutVersion = 3
	// newestKnownLayout is the newest layout this code reads.
	newestKnownLayout = layoutVersion
)

// storeKind names this store in layout errors.
const storeKind = "redis"

// layoutKey is the key of the layout version.
func (k keyLayout) layoutKey() string { return k.prefix + "layout" }

// readLayout returns the stored layout version (0: none yet).
func (s *Store) readLayout(ctx context.Context) (int, error) {
	raw, err := s.client.Get(ctx, s.keys.layoutKey()).Result()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	v, err := strconv.Atoi(raw)
	if err != nil {
		return 0, fmt.Errorf("layout version %q is not a number", raw)
	}
	return v, nil
}

// ready sets the layout up on first use (records this gateway's version,
// or with Options.NoMigrate refuses a store that is behind) and then asks
// the guard: every operation runs it first.
func (s *Store) ready(ctx context.Context) error {
	if err := s.layout.Ensure(ctx); err != nil {
		return err
	}
	return s.guard.Check(ctx)
}

// raiseLayout records layoutVersion unless the store holds it or a newer
// one; after raising an older version it waits for the older gateways to
// see it. It returns the version found before.
func (s *Store) raiseLayout(ctx context.Context) (int, error) {
	// With wait_replicas the version waits for its replicas like a claim,
	// so a failover does not bring back an older version.
	cmds, acked, err := s.evalReplicated(ctx, call(layoutScript, []string{s.keys.layoutKey()}, layoutArgs{Version: layoutVersion}))
	var found int
	if err == nil {
		found, err = cmds[0].Int()
	}
	if err == nil {
		err = s.wait.check(acked)
	}
	if err != nil {
		return 0, fmt.Errorf("record the layout version: %w", err)
	}
	return found, idempotency.WaitForOlderGateways(ctx, found, layoutVersion)
}

// LayoutVersion reads the store's layout version.
func (s *Store) LayoutVersion(ctx context.Context) (idempotency.LayoutVersion, error) {
	v := idempotency.LayoutVersion{Writes: layoutVersion, Known: newestKnownLayout}
	found, err := s.readLayout(ctx)
	if err != nil {
		return v, fmt.Errorf("redisstore: read the layout version: %w", err)
	}
	v.Found = found
	return v, nil
}

// Migrate records this gateway's layout version (the key layout itself
// needs no preparation) and returns the versions before and after.
func (s *Store) Migrate(ctx context.Context) (before, after idempotency.LayoutVersion, err error) {
	return idempotency.MigrateWith(ctx, s, func(ctx context.Context) error {
		if _, err := s.raiseLayout(ctx); err != nil {
			return fmt.Errorf("redisstore: migrate: %w", err)
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
		return fmt.Sprintf("nothing to do: %s is %d", s.keys.layoutKey(), v.Found), nil
	}
	return fmt.Sprintf("SET %s %d (now %d)", s.keys.layoutKey(), layoutVersion, v.Found), nil
}
