package ratelimit

import (
	"context"
	"fmt"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/redisscript"
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
	if err := l.Validate(); err != nil {
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

// Acquire takes a slot; a holder whose process dies frees it after lease.
func (r *Redis) Acquire(ctx context.Context, tenant, holder string, max int, lease time.Duration) (bool, error) {
	n, err := r.run(ctx, acquireScript, tenant, acquireArgs{Holder: holder, Max: max, LeaseMS: lease.Milliseconds()}).Int()
	if err != nil {
		return false, fmt.Errorf("ratelimit: redis: acquire in-flight slot: %w", err)
	}
	return n == 1, nil
}

// Renew extends the slot's lease.
func (r *Redis) Renew(ctx context.Context, tenant, holder string, lease time.Duration) error {
	if err := r.run(ctx, renewScript, tenant, renewArgs{Holder: holder, LeaseMS: lease.Milliseconds()}).Err(); err != nil {
		return fmt.Errorf("ratelimit: redis: renew in-flight slot: %w", err)
	}
	return nil
}

// run runs one of the in-flight scripts on tenant's slots.
func (r *Redis) run(ctx context.Context, script *redis.Script, tenant string, args redisscript.Args) *redis.Cmd {
	return redisscript.RunOne(ctx, r.client, redisscript.Call{Script: script, Keys: []string{r.InFlightKey(tenant)}, Args: args.Argv()})
}

// Release removes the slot.
func (r *Redis) Release(ctx context.Context, tenant, holder string) error {
	if err := r.client.ZRem(ctx, r.InFlightKey(tenant), holder).Err(); err != nil {
		return fmt.Errorf("ratelimit: redis: release in-flight slot: %w", err)
	}
	return nil
}
