// Package redisstore is the production idempotency.Store: records in Redis,
// shared by any number of gateway replicas, every transition one Lua script
// (one round trip). It works against a single Redis and against Redis
// Cluster: the keys one script touches always share a hash tag.
package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// DefaultPrefix starts every key the store writes unless Options says otherwise.
const DefaultPrefix = "gw:"

// Options configures a Store.
type Options struct {
	// Prefix starts every key (default "gw:"), so several gateways or tests
	// can share one Redis.
	Prefix string
	// WaitReplicas, when above 0, makes each claim and completion wait
	// (Redis WAIT) until that many replicas acknowledged it, so a failover
	// to one of them cannot lose it; see wait.go. 0: no waiting (Redis
	// replication is asynchronous).
	WaitReplicas int
	// WaitTimeout bounds each WAIT (default 500ms).
	WaitTimeout time.Duration
	// NoMigrate stops the store from recording its layout version
	// (store.migrate: false): a store that is behind is refused with
	// idempotency.ErrLayoutBehind, and `gateway migrate` upgrades it.
	NoMigrate bool
	// ReceiptOutbox makes each completion also record its execution's
	// receipt as pending (receipts on; see idempotency.ReceiptOutbox).
	ReceiptOutbox bool
	// EffectSweepInterval is how often the effect reservations whose
	// holder's record is gone are removed (SweepEffects; default
	// DefaultEffectSweepInterval; negative: no background sweep). A
	// reservation has no TTL (effects.go), so this is what reclaims the
	// memory of effects nobody claims again.
	EffectSweepInterval time.Duration
}

// DefaultEffectSweepInterval is Options.EffectSweepInterval's default. A
// sweep SCANs the prefix's keys on every node, so it runs rarely: a stale
// reservation costs a few dozen bytes, and counts for nothing.
const DefaultEffectSweepInterval = 10 * time.Minute

// Store is an idempotency.Store on Redis. It is safe for concurrent use.
type Store struct {
	client redis.UniversalClient
	keys   keyLayout
	wait   waitPolicy
	// receiptOutbox: completions write their outbox entry (outbox.go).
	receiptOutbox bool

	// guard refuses every operation on a layout newer than this code
	// knows (layout.go); layout records this gateway's layout version
	// before the first operation (with noMigrate: checks it is current).
	guard  *idempotency.LayoutGuard
	layout *idempotency.LayoutSetUp
	// sweeper runs SweepEffects in the background until Close.
	sweeper *idempotency.Sweeper
}

var (
	_ idempotency.Store    = (*Store)(nil)
	_ idempotency.Admin    = (*Store)(nil)
	_ idempotency.Migrator = (*Store)(nil)
)

// New returns a Store on client (a *redis.Client, *redis.ClusterClient or
// any other UniversalClient). The caller keeps ownership of client.
func New(client redis.UniversalClient, opts Options) *Store {
	prefix := opts.Prefix
	if prefix == "" {
		prefix = DefaultPrefix
	}
	// Only a cluster forces a record into its session's slot (see keyLayout).
	_, cluster := client.(*redis.ClusterClient)
	s := &Store{client: client, keys: keyLayout{prefix: prefix, sessionSlots: cluster}, wait: newWaitPolicy(opts),
		receiptOutbox: opts.ReceiptOutbox}
	s.guard = idempotency.NewLayoutGuard(storeKind, newestKnownLayout, s.readLayout)
	s.layout = idempotency.NewLayoutSetUp(storeKind, layoutVersion, opts.NoMigrate, s.readLayout, func(ctx context.Context) error {
		_, err := s.raiseLayout(ctx)
		return err
	})
	s.sweeper = idempotency.StartSweeper(opts.EffectSweepInterval, DefaultEffectSweepInterval, func(ctx context.Context) {
		_, _ = s.SweepEffects(ctx) // a failed sweep is tried again at the next tick
		_, _ = s.SweepBudgets(ctx)
	})
	return s
}

// Ping reports whether Redis answers, with a layout this code knows.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.ready(ctx); err != nil {
		return fmt.Errorf("redisstore: ping: %w", err)
	}
	if err := s.client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redisstore: ping: %w", err)
	}
	return nil
}

// Close stops the background sweep; the client belongs to the caller, who
// closes it.
func (s *Store) Close() error {
	s.sweeper.Stop()
	return nil
}
