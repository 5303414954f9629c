package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/toolgateway/toolgateway/gateway/ratelimit"
)

// limitsMigration is the schema version (3) that adds
// the state of the tenants' limits, a step of its own.
//
// Both tables are UNLOGGED: a decision writes no WAL, so its commit waits
// for no flush (a transaction that wrote only unlogged tables commits
// asynchronously) and a limit check costs about what a read does. The
// price: after a crash of the database or a failover to a standby the
// tables are empty, so every tenant starts a fresh burst and the running
// tools' slots come back at their next renewal (a third of a lease). That
// is the same loss as a Redis restarted without persistence, and it never
// touches an idempotency record.
const limitsMigration = `
-- One row per tenant with a rate: its GCRA state. Times are nanoseconds
-- since the epoch on the database's clock (exact integer arithmetic, the
-- same formulas as package ratelimit's Memory).
CREATE UNLOGGED TABLE IF NOT EXISTS @.rate_limits (
	tenant     text   PRIMARY KEY,
	tat_ns     bigint NOT NULL, -- theoretical arrival time
	decided_ns bigint NOT NULL, -- when the last decision was taken
	retry_ns   bigint NOT NULL  -- that decision's wait: 0 when it let the call through
);

-- One row per running tool of a tenant with max_in_flight: a slot, leased
-- like a record (renewed while the tool runs, dead once expires_at passed).
CREATE UNLOGGED TABLE IF NOT EXISTS @.inflight_slots (
	tenant     text        NOT NULL,
	holder     text        NOT NULL,
	expires_at timestamptz NOT NULL,
	PRIMARY KEY (tenant, holder)
);

-- acquire_slot takes one of the tenant's p_max slots for p_holder, in one
-- call. Acquirers of a tenant queue on a transaction-scoped advisory lock;
-- in a function each statement reads a snapshot taken when it starts, so
-- the count below, taken after the lock, sees every slot the previous
-- holder of the lock committed (its commit is visible before its locks are
-- released). Expired slots of the tenant are deleted on the way, so they
-- never count. A holder that has a slot keeps it (its lease is extended).
CREATE OR REPLACE FUNCTION @.acquire_slot(p_tenant text, p_holder text, p_max integer, p_lease_us bigint)
RETURNS boolean
LANGUAGE plpgsql AS $fn$
DECLARE
	now_ts timestamptz;
	live   bigint;
BEGIN
	-- 0x746c ("tl"), unlike the migration's lock; tenants whose names hash
	-- alike (or alike tenants of two schemas) merely queue together.
	PERFORM pg_advisory_xact_lock(29804, hashtext(p_tenant));
	now_ts := clock_timestamp();
	DELETE FROM @.inflight_slots s WHERE s.tenant = p_tenant AND s.expires_at <= now_ts;
	UPDATE @.inflight_slots s SET expires_at = now_ts + p_lease_us * interval '1 microsecond'
	WHERE s.tenant = p_tenant AND s.holder = p_holder;
	IF FOUND THEN
		RETURN true;
	END IF;
	SELECT count(*) INTO live FROM @.inflight_slots s WHERE s.tenant = p_tenant;
	IF live >= p_max THEN
		RETURN false;
	END IF;
	INSERT INTO @.inflight_slots (tenant, holder, expires_at)
	VALUES (p_tenant, p_holder, now_ts + p_lease_us * interval '1 microsecond');
	RETURN true;
END
$fn$;
`

// Limiter is the ratelimit.Backend of a PostgreSQL store: the tenants'
// limits kept in the store's schema, so every gateway replica sharing the
// records shares the limits, measured on the database's clock. Each
// decision is one round trip:
//
//   - Allow is one INSERT ... ON CONFLICT DO UPDATE on the tenant's row of
//     rate_limits: the GCRA of redis_rate and ratelimit.Memory (same burst,
//     same RetryAfter), decided on the row as locked by the upsert, so
//     concurrent calls of a tenant serialise on it and none is lost;
//   - Acquire is one call of acquire_slot (see limitsMigration); Renew is
//     one upsert of the holder's slot (it re-takes a slot lost to a crash
//     of the database: the tool is still running, as with Redis); Release
//     one DELETE.
type Limiter struct {
	s   *Store
	sql limitStatements
}

var _ ratelimit.Backend = (*Limiter)(nil)

// limitStatements are the Limiter's SQL texts, schema written in.
type limitStatements struct {
	allow, acquire, renew, release string
}

func newLimitStatements(schema string) limitStatements {
	q := qualifier(schema)
	return limitStatements{
		// $1 tenant, $2 the emission interval and $3 the burst offset
		// (burst × emission), in ns. A new row is a first call: allowed,
		// since burst ≥ 1. Otherwise, with tat = max(tat, now), the call
		// passes when tat + emission - burst offset <= now and moves tat
		// on by one emission; a refusal keeps tat and returns the wait.
		// The right-hand sides all see the row as it was (SQL semantics).
		// now is read before the upsert waits for the row's lock, so a
		// decision that took the lock first may have been taken later:
		// the decision's now is the later of the two (the row's clock
		// never runs back), else a refusal's wait would count the time
		// it queued and come out above one emission.
		allow: q(`WITH c AS (SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint * 1000 AS now_ns)
			INSERT INTO @.rate_limits AS r (tenant, tat_ns, decided_ns, retry_ns)
			SELECT $1, c.now_ns + $2, c.now_ns, 0 FROM c
			ON CONFLICT (tenant) DO UPDATE SET
				tat_ns = CASE WHEN greatest(r.tat_ns, excluded.decided_ns, r.decided_ns) + $2 - $3 <= greatest(excluded.decided_ns, r.decided_ns)
					THEN greatest(r.tat_ns, excluded.decided_ns, r.decided_ns) + $2 ELSE r.tat_ns END,
				retry_ns = greatest(greatest(r.tat_ns, excluded.decided_ns, r.decided_ns) + $2 - $3 - greatest(excluded.decided_ns, r.decided_ns), 0),
				decided_ns = greatest(excluded.decided_ns, r.decided_ns)
			RETURNING retry_ns`),
		acquire: q(`SELECT @.acquire_slot($1, $2, $3, $4)`),
		renew: q(`INSERT INTO @.inflight_slots AS s (tenant, holder, expires_at)
			VALUES ($1, $2, clock_timestamp() + $3 * interval '1 microsecond')
			ON CONFLICT (tenant, holder) DO UPDATE SET expires_at = excluded.expires_at`),
		release: q(`DELETE FROM @.inflight_slots WHERE tenant = $1 AND holder = $2`),
	}
}

// Limiter returns the store's ratelimit.Backend. It shares the store's
// pool and schema (created by the store's migration, like the records) and
// lives as long as the store.
func (s *Store) Limiter() *Limiter {
	return &Limiter{s: s, sql: newLimitStatements(s.schema)}
}

// Allow counts one call of tenant against l, or refuses it with the wait
// until the next call would pass.
func (l *Limiter) Allow(ctx context.Context, tenant string, limit ratelimit.Limit) (ratelimit.Verdict, error) {
	if err := limit.Validate(); err != nil {
		return ratelimit.Verdict{}, fmt.Errorf("pgstore: rate limit of tenant %q: %w", tenant, err)
	}
	emission, burstOffset := limit.GCRA()
	if err := l.s.ready(ctx); err != nil {
		return ratelimit.Verdict{}, fmt.Errorf("pgstore: rate limit of tenant %q: %w", tenant, err)
	}
	var retry int64
	if err := l.s.pool.QueryRow(ctx, l.sql.allow, tenant, int64(emission), int64(burstOffset)).Scan(&retry); err != nil {
		return ratelimit.Verdict{}, fmt.Errorf("pgstore: rate limit of tenant %q: %w", tenant, err)
	}
	if retry == 0 {
		return ratelimit.Verdict{Allowed: true}, nil
	}
	return ratelimit.Verdict{RetryAfter: time.Duration(retry)}, nil
}

// Acquire takes one of tenant's max slots for holder; a holder whose
// process dies frees it after lease (the database's clock decides).
func (l *Limiter) Acquire(ctx context.Context, tenant, holder string, max int, lease time.Duration) (bool, error) {
	if err := l.s.ready(ctx); err != nil {
		return false, fmt.Errorf("pgstore: acquire in-flight slot of tenant %q: %w", tenant, err)
	}
	var got bool
	if err := l.s.pool.QueryRow(ctx, l.sql.acquire, tenant, holder, max, micros(lease)).Scan(&got); err != nil {
		return false, fmt.Errorf("pgstore: acquire in-flight slot of tenant %q: %w", tenant, err)
	}
	return got, nil
}

// Renew extends holder's slot to lease from now (or takes it again if the
// database lost it).
func (l *Limiter) Renew(ctx context.Context, tenant, holder string, lease time.Duration) error {
	if err := l.s.ready(ctx); err != nil {
		return fmt.Errorf("pgstore: renew in-flight slot of tenant %q: %w", tenant, err)
	}
	if _, err := l.s.pool.Exec(ctx, l.sql.renew, tenant, holder, micros(lease)); err != nil {
		return fmt.Errorf("pgstore: renew in-flight slot of tenant %q: %w", tenant, err)
	}
	return nil
}

// Release gives holder's slot back.
func (l *Limiter) Release(ctx context.Context, tenant, holder string) error {
	if err := l.s.ready(ctx); err != nil {
		return fmt.Errorf("pgstore: release in-flight slot of tenant %q: %w", tenant, err)
	}
	if _, err := l.s.pool.Exec(ctx, l.sql.release, tenant, holder); err != nil {
		return fmt.Errorf("pgstore: release in-flight slot of tenant %q: %w", tenant, err)
	}
	return nil
}
