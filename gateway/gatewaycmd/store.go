package gatewaycmd

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/idempotency/pgstore"
)

// The stores a config can select.
const (
	storeKindEmbedded     = "embedded"
	storeKindRedis        = "redis"
	storeKindRedisCluster = "redis-cluster"
	storeKindPostgres     = "postgres"
)

// storeChoice is the store a config selects, checked without connecting.
type storeChoice struct {
	// kind is one of the storeKind constants.
	kind string
	// desc names it for logs and `gateway check` (never a password):
	// "redis:host:port", "postgres:host/db schema s", "embedded:/path".
	desc string
}

// storeChoice checks the store section (after the environment overrides)
// as start-up does and says which store it selects: two shared stores,
// an unparsable Redis or PostgreSQL URL, options of another store are
// refused, naming the variable when the value came from the environment.
func (c *Config) storeChoice() (storeChoice, error) {
	if err := c.Store.checkChoice(); err != nil {
		return storeChoice{}, err
	}
	switch {
	case c.Store.PostgresURL != "":
		if _, err := pgxpool.ParseConfig(c.Store.PostgresURL); err != nil {
			return storeChoice{}, fmt.Errorf("%s: %w", orString(c.postgresURLFrom, "store.postgres_url"), err)
		}
		return storeChoice{kind: storeKindPostgres,
			desc: "postgres:" + redactedURL(c.Store.PostgresURL) + " schema " + orString(c.Store.PostgresSchema, pgstore.DefaultSchema)}, nil
	case c.Store.RedisURL == "" && len(c.Store.ClusterAddrs) == 0:
		return storeChoice{kind: storeKindEmbedded, desc: "embedded:" + c.path(c.Store.Path)}, nil
	}
	if c.Store.WaitReplicas < 0 {
		return storeChoice{}, fmt.Errorf("store.wait_replicas: %d: must be 0 or more", c.Store.WaitReplicas)
	}
	if len(c.Store.ClusterAddrs) > 0 {
		return storeChoice{kind: storeKindRedisCluster, desc: "redis-cluster:" + strings.Join(c.Store.ClusterAddrs, ",")}, nil
	}
	opts, err := redis.ParseURL(c.Store.RedisURL)
	if err != nil {
		// Name where the URL came from: the environment overrides the file.
		return storeChoice{}, fmt.Errorf("%s: %w", orString(c.redisURLFrom, "store.redis_url"), err)
	}
	return storeChoice{kind: storeKindRedis, desc: "redis:" + opts.Addr}, nil
}
