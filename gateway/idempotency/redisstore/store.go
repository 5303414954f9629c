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
	// NoLegacyLayout stops looking for records of the previous key layout
	// (hashes under <prefix>r:, step entries under <prefix>s:). Leave it
	// off until the longest lock_ttl + replay_ttl of any tool has passed
	// since the last gateway of the previous version stopped: until then
	// such records still decide claims (a replay must not become a second
	// execution). Then set it, which saves each claim two key lookups, and
	// the compat path can be deleted from the code.
	NoLegacyLayout bool
}

// Store is an idempotency.Store on Redis. It is safe for concurrent use.
type Store struct {
	client redis.UniversalClient
	keys   keyLayout
	wait   waitPolicy
	// legacy: claims, Get, Delete, List and Resolve also look at the
	// previous layout's keys (Options.NoLegacyLayout off).
	legacy bool
}

var (
	_ idempotency.Store = (*Store)(nil)
	_ idempotency.Admin = (*Store)(nil)
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
	return &Store{client: client, keys: keyLayout{prefix: prefix, sessionSlots: cluster}, wait: newWaitPolicy(opts), legacy: !opts.NoLegacyLayout}
}

// Ping reports whether Redis answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redisstore: ping: %w", err)
	}
	return nil
}

// Close does nothing: the client belongs to the caller, who closes it.
func (s *Store) Close() error { return nil }
