// Package ratelimit keeps the per-tenant limits of the gateway: a GCRA rate
// (N calls per second, minute or hour with a burst) and a cap on the tools a
// tenant has running at once. A Backend holds the state where the
// idempotency records live, so every replica sharing a store shares the
// limits: Redis (shared by all replicas, redis_rate's GCRA), the
// PostgreSQL store's own (pgstore.Limiter, the same GCRA in its tables) or
// Memory (the embedded store's single process).
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Limit is a GCRA rate: Rate calls per Period, of which Burst may come at
// once. The zero Limit means no limit.
type Limit struct {
	Rate   int
	Period time.Duration
	Burst  int
}

// IsZero reports whether l limits nothing.
func (l Limit) IsZero() bool { return l.Rate == 0 }

// String writes l as it is configured, e.g. "100/s (burst 200)".
func (l Limit) String() string {
	unit := map[time.Duration]string{time.Second: "s", time.Minute: "m", time.Hour: "h"}[l.Period]
	if unit == "" {
		unit = l.Period.String()
	}
	return fmt.Sprintf("%d/%s (burst %d)", l.Rate, unit, l.Burst)
}

// ParseRate parses "N/s", "N/m" or "N/h" (N a positive integer) into a
// Limit whose Burst is N, the burst redis_rate's PerSecond and friends
// give: a rate of 100/s lets 100 calls through at once, then one every
// 10 ms.
func ParseRate(s string) (Limit, error) {
	count, unit, ok := strings.Cut(strings.TrimSpace(s), "/")
	n, err := strconv.Atoi(count)
	if !ok || err != nil || n <= 0 || count != strconv.Itoa(n) {
		return Limit{}, fmt.Errorf("%q: want N/s, N/m or N/h with N a positive integer", s)
	}
	var period time.Duration
	switch unit {
	case "s":
		period = time.Second
	case "m":
		period = time.Minute
	case "h":
		period = time.Hour
	default:
		return Limit{}, fmt.Errorf("%q: want N/s, N/m or N/h with N a positive integer", s)
	}
	return Limit{Rate: n, Period: period, Burst: n}, nil
}

// Verdict is a Backend's answer to Allow.
type Verdict struct {
	Allowed bool
	// RetryAfter is when the next call would be allowed (refusals only).
	RetryAfter time.Duration
}

// Backend keeps the limit state of every tenant. Every method is one
// atomic step; an error means the backend could not be reached, and the
// gateway then runs nothing (503, like a store that is down).
type Backend interface {
	// Allow counts one call of tenant against l, or refuses it.
	Allow(ctx context.Context, tenant string, l Limit) (Verdict, error)
	// Acquire takes one of tenant's max in-flight slots for holder (a
	// unique id of the execution), held until Release, or for lease if
	// the holder's process dies first (Renew extends it). It reports
	// false when all max slots are taken.
	Acquire(ctx context.Context, tenant, holder string, max int, lease time.Duration) (bool, error)
	// Renew extends holder's slot to lease from now.
	Renew(ctx context.Context, tenant, holder string, lease time.Duration) error
	// Release gives holder's slot back.
	Release(ctx context.Context, tenant, holder string) error
}

// ErrInvalidLimit is returned for a Limit that cannot be enforced.
var ErrInvalidLimit = errors.New("ratelimit: invalid limit")

// Validate refuses a limit with a non-positive rate, period or burst
// ([ErrInvalidLimit]): every [Backend]'s Allow checks it first.
func (l Limit) Validate() error {
	if l.Rate <= 0 || l.Period <= 0 || l.Burst <= 0 {
		return fmt.Errorf("%w: %+v", ErrInvalidLimit, l)
	}
	return nil
}

// GCRA is l in the terms of the GCRA (a valid l, see [Limit.Validate]):
// each call moves a tenant's theoretical arrival time on by emission, and
// a call passes while that time is at most burstOffset ahead of now. The
// integer arithmetic is redis_rate's, so [Memory] and the stores' own
// backends give the same verdicts and waits.
func (l Limit) GCRA() (emission, burstOffset time.Duration) {
	emission = l.Period / time.Duration(l.Rate)
	return emission, emission * time.Duration(l.Burst)
}
