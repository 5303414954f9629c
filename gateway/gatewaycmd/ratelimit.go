package gatewaycmd

import (
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/pgstore"
	"github.com/toolgateway/toolgateway/gateway/idempotency/redisstore"
	"github.com/toolgateway/toolgateway/gateway/ratelimit"
)

// limiterFor returns the backend of the tenants' limits, kept where the
// records are so every replica sharing the store shares the limits: Redis
// (redis_rate) for the Redis store, the store's own tables for the
// PostgreSQL store, nil (the gateway's in-process default) for the
// embedded store, which serves one process anyway.
func (c *Config) limiterFor(store idempotency.Store) ratelimit.Backend {
	switch s := store.(type) {
	case clientOwningStore:
		return ratelimit.NewRedis(s.client, orString(c.Store.KeyPrefix, redisstore.DefaultPrefix))
	case *pgstore.Store:
		return s.Limiter()
	}
	return nil
}
