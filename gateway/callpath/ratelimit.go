package callpath

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/ratelimit"
	"github.com/toolgateway/toolgateway/wire"
)

// Tenant limits on the call path (docs/operations.md, "Tenant rate
// limits"). Both checks sit in Engine.Call, so REST and MCP calls count
// alike:
//
//   - the rate, after the request's own checks (a malformed request gets
//     its 400 or 422 whatever the rate) and before the store decision, so
//     a refused call stores nothing; replays count against it;
//   - max_in_flight, once the store decided the call runs (a replay, an
//     "in progress" or a conflict takes no slot); a call over it gives its
//     fresh claim back, so nothing stays stored.
//
// Either refusal is 429 rate_limited with Retry-After, built here as a
// Problem so every adapter renders it its own way.

// TenantLimits are a tenant's optional limits; the zero value limits nothing.
type TenantLimits struct {
	// Rate is a GCRA rate with its burst (auth.tenants[].rate and burst).
	Rate ratelimit.Limit
	// MaxInFlight caps the tenant's tools running at once (0: no cap).
	MaxInFlight int
}

// Which limit refused a call: the "limit" label of gateway_rate_limited_total.
const (
	limitRate     = "rate"
	limitInFlight = "in_flight"
)

// The op label of gateway_store_errors_total for the limiter's store
// failures (the limits live in the records' store).
const (
	opRateLimit = "rate_limit"
	opInFlight  = "in_flight"
)

// inFlightRetryAfter is the Retry-After of a call refused for max_in_flight:
// nobody knows when a running tool ends, and a second is short enough for
// an agent and long enough not to hammer the gateway.
const inFlightRetryAfter = 1

// checkLimits refuses limits the gateway could not enforce; the error
// starts with the field's path under the tenant, as ValidateAuth's do.
// The one rule for tenant limits: the config only converts them.
func (l TenantLimits) checkLimits() error {
	r := l.Rate
	if !r.IsZero() {
		if r.Rate <= 0 || r.Period <= 0 {
			return fmt.Errorf("rate: %s: rate and period must be positive", r)
		}
		if r.Burst <= 0 {
			return fmt.Errorf("burst: %d: must be at least 1 (absent: the rate's count)", r.Burst)
		}
	}
	if l.MaxInFlight < 0 {
		return fmt.Errorf("max_in_flight: %d: must be 0 (no cap) or more", l.MaxInFlight)
	}
	return nil
}

// tenantLimits indexes the tenants that have limits by name.
func tenantLimits(tenants []Tenant) map[string]TenantLimits {
	limits := map[string]TenantLimits{}
	for _, t := range tenants {
		if !t.Limits.Rate.IsZero() || t.Limits.MaxInFlight > 0 {
			limits[t.Name] = t.Limits
		}
	}
	return limits
}

// staticNames is the set of the listed tenants' names.
func staticNames(tenants []Tenant) map[string]bool {
	names := make(map[string]bool, len(tenants))
	for _, t := range tenants {
		names[t.Name] = true
	}
	return names
}

// limitsOf returns tenant's limits: a listed tenant's own, or for a tenant
// only the identity provider names, the provider's tenants' limits.
func (set *settings) limitsOf(tenant string) (TenantLimits, bool) {
	if l, ok := set.limits[tenant]; ok || set.static[tenant] || set.oidc == nil {
		return l, ok
	}
	l := set.providerLimits
	return l, !l.Rate.IsZero() || l.MaxInFlight > 0
}

// rateLimited is the 429 of a call over one of its tenant's limits.
func (s *Engine) rateLimited(tenant, limit, detail string, retryAfter int) *Problem {
	s.metrics.rateLimited.WithLabelValues(tenant, limit).Inc()
	return NewProblem(wire.CodeRateLimited, detail).WithRetryAfter(retryAfter)
}

// admitRate counts the call against its tenant's rate; nil means go on.
func (s *Engine) admitRate(ctx context.Context, c *Call) *Problem {
	limits, ok := s.settings.Load().limitsOf(c.Tenant)
	if !ok || limits.Rate.IsZero() {
		return nil
	}
	v, err := s.limiter.Allow(ctx, c.Tenant, limits.Rate)
	if err != nil {
		s.metrics.storeErrors.WithLabelValues(opRateLimit).Inc()
		s.log.ErrorContext(ctx, "rate limiter failed", "tool", c.Entry.Spec.Name, "tenant", c.Tenant, "error", err)
		return NewProblem(wire.CodeStoreUnavailable, "the rate limiter's store is unreachable; the tool was not run").WithRetryAfter(1)
	}
	if v.Allowed {
		return nil
	}
	return s.rateLimited(c.Tenant, limitRate,
		fmt.Sprintf("tenant over its rate limit of %s; retry after Retry-After seconds", limits.Rate), ceilSeconds(v.RetryAfter))
}

// takeSlot takes one of the tenant's in-flight slots for holder. The
// returned leave gives it back; it is a no-op for a tenant without a cap.
func (s *Engine) takeSlot(ctx context.Context, c *Call, holder string) (leave func(), p *Problem) {
	limits, ok := s.settings.Load().limitsOf(c.Tenant)
	if !ok || limits.MaxInFlight == 0 {
		return func() {}, nil
	}
	lease := s.opts.LockTTL
	got, err := s.limiter.Acquire(ctx, c.Tenant, holder, limits.MaxInFlight, lease)
	if err != nil {
		s.metrics.storeErrors.WithLabelValues(opInFlight).Inc()
		s.log.ErrorContext(ctx, "in-flight limiter failed", "tool", c.Entry.Spec.Name, "tenant", c.Tenant, "error", err)
		return nil, NewProblem(wire.CodeStoreUnavailable, "the rate limiter's store is unreachable; the tool was not run").WithRetryAfter(1)
	}
	if !got {
		return nil, s.rateLimited(c.Tenant, limitInFlight,
			fmt.Sprintf("tenant has %d tools running, its max_in_flight; retry after Retry-After seconds", limits.MaxInFlight), inFlightRetryAfter)
	}
	// The slot is a lease like the record's: renewed every lease/3 while
	// the tool runs, so a replica that dies frees its slots after one lease.
	r := &slotRenewal{s: s, tenant: c.Tenant, holder: holder, lease: lease}
	r.mu.Lock()
	r.timer = time.AfterFunc(lease/3, r.renew)
	r.mu.Unlock()
	return r.release, nil
}

// slotRenewal keeps an in-flight slot alive until it is released.
type slotRenewal struct {
	s              *Engine
	tenant, holder string
	lease          time.Duration

	mu       sync.Mutex
	timer    *time.Timer
	released bool
}

func (r *slotRenewal) renew() {
	// Under the lock, so a release cannot slip between a renewal's ZADD
	// and its return and leave the slot taken.
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.released {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeCallTimeout)
	defer cancel()
	if err := r.s.limiter.Renew(ctx, r.tenant, r.holder, r.lease); err != nil {
		r.s.metrics.storeErrors.WithLabelValues(opInFlight).Inc()
		r.s.log.WarnContext(ctx, "in-flight slot renewal failed", "tenant", r.tenant, "error", err)
	}
	r.timer.Reset(r.lease / 3)
}

func (r *slotRenewal) release() {
	r.mu.Lock()
	r.released = true
	r.timer.Stop()
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), storeCallTimeout)
	defer cancel()
	if err := r.s.limiter.Release(ctx, r.tenant, r.holder); err != nil {
		r.s.metrics.storeErrors.WithLabelValues(opInFlight).Inc()
		// The slot frees itself when its lease ends.
		r.s.log.WarnContext(ctx, "in-flight slot release failed", "tenant", r.tenant, "error", err)
	}
}

// giveBackClaim releases a claim the call will not run (over
// max_in_flight), so nothing of it stays stored and a retry claims afresh.
func (s *Engine) giveBackClaim(ctx context.Context, lease idempotency.Lease) {
	storeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeCallTimeout)
	defer cancel()
	if err := s.store.Release(storeCtx, lease); err != nil {
		// The record stays IN_PROGRESS until its lease expires; then the
		// tool's lease_expiry policy applies.
		s.log.WarnContext(ctx, "release of a claim refused by max_in_flight failed", "tool", lease.Scope.Tool, "error", err)
	}
}
