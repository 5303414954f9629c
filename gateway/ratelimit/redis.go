package ratelimit

import (
	"context"
	"fmt"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// Redis is the Backend shared by every replica on one Redis or Redis
// Cluster: the rate is redis_rate's GCRA, the in-flight slots a sorted set
// per tenant whose members expire like leases. Each operation touches one
// key, so it runs on any cluster node; time is Redis's own (TIME), so the
// replicas' clocks do not matter.
//
// Keys: "rate:<prefix>tenant:<name>" (redis_rate adds "rate:") holds the
// GCRA's arrival time, "<prefix>inflight:<name>" the slots.
type Redis struct {
	client  redis.UniversalClient
	limiter *redis_rate.Limiter
	prefix  string
}

var _ Backend = (*Redis)(nil)

// NewRedis returns a Backend on client; prefix starts its keys (use the
// store's key prefix). The caller keeps ownership of client.
func NewRedis(client redis.UniversalClient, prefix string) *Redis {
	return &Redis{client: client, limiter: redis_rate.NewLimiter(client), prefix: prefix}
}

// Allow counts one call with redis_rate.
func (r *Redis) Allow(ctx context.Context, tenant string, l Limit) (Verdict, error) {
	if err := l.check(); err != nil {
		return Verdict{}, err
	}
	res, err := r.limiter.Allow(ctx, r.rateKey(tenant), redis_rate.Limit{Rate: l.Rate, Period: l.Period, Burst: l.Burst})
	if err != nil {
		return Verdict{}, fmt.Errorf("ratelimit: redis: allow: %w", err)
	}
	if res.Allowed > 0 {
		return Verdict{Allowed: true}, nil
	}
	return Verdict{RetryAfter: max(res.RetryAfter, 0)}, nil
}

// rateKey is redis_rate's key without the "rate:" it prepends.
func (r *Redis) rateKey(tenant string) string { return r.prefix + "tenant:" + tenant }

// InFlightKey is the sorted set of tenant's in-flight slots.
func (r *Redis) InFlightKey(tenant string) string { return r.prefix + "inflight:" + tenant }

// RateKey is the key redis_rate keeps tenant's GCRA state in.
func (r *Redis) RateKey(tenant string) string { return "rate:" + r.rateKey(tenant) }

// luaNow is the script prelude: Redis's clock in milliseconds. Scripts
// that read TIME and then write must replicate their effects (the default
// from Redis 7; asked for explicitly for older servers).
const luaNow = `
redis.replicate_commands()
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`

// acquireScript takes a slot when fewer than max live holders are in the set.
var acquireScript = redis.NewScript(`
local slots = KEYS[1]
local holder = ARGV[1]
local max = tonumber(ARGV[2])
local lease_ms = tonumber(ARGV[3])
` + luaNow + `
redis.call('ZREMRANGEBYSCORE', slots, '-inf', now)
if not redis.call('ZSCORE', slots, holder) and redis.call('ZCARD', slots) >= max then
  return 0
end
redis.call('ZADD', slots, now + lease_ms, holder)
if redis.call('PTTL', slots) < lease_ms then redis.call('PEXPIRE', slots, lease_ms) end
return 1
`)

// renewScript extends (or re-takes: the tool is still running) holder's slot.
var renewScript = redis.NewScript(`
local slots = KEYS[1]
local holder = ARGV[1]
local lease_ms = tonumber(ARGV[2])
` + luaNow + `
redis.call('ZADD', slots, now + lease_ms, holder)
if redis.call('PTTL', slots) < lease_ms then redis.call('PEXPIRE', slots, lease_ms) end
return 1
`)

// Acquire takes a slot; a holder whose process dies frees it after lease.
func (r *Redis) Acquire(ctx context.Context, tenant, holder string, max int, lease time.Duration) (bool, error) {
	n, err := acquireScript.Run(ctx, r.client, []string{r.InFlightKey(tenant)}, holder, max, lease.Milliseconds()).Int()
	if err != nil {
		return false, fmt.Errorf("ratelimit: redis: acquire in-flight slot: %w", err)
	}
	return n == 1, nil
}

// Renew extends the slot's lease.
func (r *Redis) Renew(ctx context.Context, tenant, holder string, lease time.Duration) error {
	if err := renewScript.Run(ctx, r.client, []string{r.InFlightKey(tenant)}, holder, lease.Milliseconds()).Err(); err != nil {
		return fmt.Errorf("ratelimit: redis: renew in-flight slot: %w", err)
	}
	return nil
}

// Release removes the slot.
func (r *Redis) Release(ctx context.Context, tenant, holder string) error {
	if err := r.client.ZRem(ctx, r.InFlightKey(tenant), holder).Err(); err != nil {
		return fmt.Errorf("ratelimit: redis: release in-flight slot: %w", err)
	}
	return nil
}
