package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

var _ idempotency.BudgetKeeper = (*Store)(nil)

// KeepsBudgets reports that Claim honours idempotency.ClaimRequest.Charges.
func (s *Store) KeepsBudgets() bool { return true }

// The budget statements (statements.go writes the schema in).
const (
	// claimCharged is the claim with budget charges ($24, JSON): charge()
	// runs on claim()'s row in the same statement.
	claimCharged = `SELECT ` + claimColumns + `,
			@.charge(outcome, a_by IS NOT NULL, $1, $2, $3, $6, $24::jsonb)
		FROM ` + claimCall
	// budgetUsage: $1 bucket, $2 window start µs (the smallest bigint: the
	// whole bucket). Held: rows whose record is not COMPLETED in the same
	// life (or is gone, which may have acted).
	budgetUsage = `SELECT COALESCE(sum(g.cost), 0)::bigint,
			COALESCE(sum(g.cost) FILTER (WHERE r.state IS DISTINCT FROM 'COMPLETED'), 0)::bigint
		FROM @.budget_charges g LEFT JOIN @.records r ON r.tenant = g.tenant AND r.tool = g.tool
			AND r.idempotency_key = g.idempotency_key AND r.created_at = g.created_at
		WHERE g.bucket = $1 AND g.charged_us >= $2`
	// reservations are the live record's reservations in its life: one
	// row with a NULL bucket for a record that charged nothing, none for
	// no record.
	reservations = `SELECT g.bucket, g.cost
		FROM @.records r CROSS JOIN ` + clock + `
			LEFT JOIN @.budget_charges g ON g.tenant = r.tenant AND g.tool = r.tool
				AND g.idempotency_key = r.idempotency_key AND g.created_at = r.created_at
		WHERE r.tenant = $1 AND r.tool = $2 AND r.idempotency_key = $3 AND r.expires_at > c.now`
)

// budgetsMigration is schema version 10: budget reservations
// (docs/budgets.md). A reservation is a row of budget_charges naming its
// bucket and its record's life (tenant, tool, key and the record's
// created_at, which a takeover keeps and a new record under the key does
// not share), and budget_totals keeps each bucket's running total.
// charge() takes a claimed call's charges in the claim's own statement
// (claimCharged: it runs in the select list over claim()'s row, so both
// are one statement and one transaction): holding the bucket's total row
// locked (so two claims of one bucket sum one after the other, each
// seeing the other's committed rows), it reads the sum — the total for a
// calendar bucket, which is its window; the window's rows for a rolling
// one — and raises SQLSTATE TGB01 when a charge would go over the limit,
// which rolls the claim back with it. Release, Delete and
// DropReconciled delete the record's rows in the statement that deletes
// the record; nothing else does (the sweep keeps a completed call's cost
// counted in its window). Rows are dropped with their window by charge()
// itself, once they are older than the window and its retention.
const budgetsMigration = `
CREATE TABLE IF NOT EXISTS @.budget_charges (
	bucket          text NOT NULL,
	tenant          text NOT NULL,
	tool            text NOT NULL,
	idempotency_key text NOT NULL,
	created_at      timestamptz NOT NULL,
	cost            bigint NOT NULL,
	charged_us      bigint NOT NULL,
	PRIMARY KEY (bucket, tenant, tool, idempotency_key, created_at)
);
CREATE INDEX IF NOT EXISTS budget_charges_record ON @.budget_charges (tenant, tool, idempotency_key);
CREATE INDEX IF NOT EXISTS budget_charges_window ON @.budget_charges (bucket, charged_us);
CREATE TABLE IF NOT EXISTS @.budget_totals (
	bucket     text PRIMARY KEY,
	total      bigint NOT NULL,
	expires_us bigint NOT NULL
);
CREATE OR REPLACE FUNCTION @.charge(p_outcome text, p_consumed boolean, p_tenant text, p_tool text, p_key text,
	p_owner text, p_charges jsonb) RETURNS boolean
LANGUAGE plpgsql AS $fn$
DECLARE
	rec   @.records%ROWTYPE;
	ch    record;
	total bigint;
	i     integer := 0;
BEGIN
	IF p_outcome <> 'claimed' OR p_charges IS NULL THEN
		RETURN false;
	END IF;
	SELECT * INTO rec FROM @.records
		WHERE tenant = p_tenant AND tool = p_tool AND idempotency_key = p_key;
	-- A claim decided on another record (an effect's holder) or not
	-- owned by this request charges nothing here.
	IF NOT FOUND OR rec.state <> 'IN_PROGRESS' OR rec.owner IS DISTINCT FROM p_owner THEN
		RETURN false;
	END IF;
	-- A record is charged once in its life (created_at), in the window
	-- of that charge: a takeover or a resent claim, even in a later
	-- window, charges nothing.
	IF EXISTS (SELECT 1 FROM @.budget_charges g WHERE g.tenant = p_tenant AND g.tool = p_tool
			AND g.idempotency_key = p_key AND g.created_at = rec.created_at) THEN
		RETURN true;
	END IF;
	FOR ch IN SELECT * FROM jsonb_to_recordset(p_charges)
			AS x(bucket text, budget text, lim bigint, cost bigint, at_us bigint, since_us bigint, retain_us bigint, rolling boolean)
			ORDER BY bucket LOOP
		i := i + 1;
		-- The bucket's total row, locked: racing claims of the bucket sum
		-- one after the other, each seeing the other's committed rows.
		INSERT INTO @.budget_totals (bucket, total, expires_us) VALUES (ch.bucket, 0, ch.at_us + ch.retain_us)
			ON CONFLICT (bucket) DO NOTHING;
		SELECT t.total INTO total FROM @.budget_totals t WHERE t.bucket = ch.bucket FOR UPDATE;
		IF NOT p_consumed THEN
			IF ch.rolling THEN -- a calendar bucket is its window: its total is the sum
				SELECT COALESCE(sum(g.cost), 0) INTO total FROM @.budget_charges g
					WHERE g.bucket = ch.bucket AND g.charged_us >= ch.since_us;
			END IF;
			IF ch.cost > ch.lim - total THEN
				RAISE EXCEPTION USING ERRCODE = 'TGB01', MESSAGE = 'budget exceeded',
					DETAIL = (ch.lim - total)::text || ' ' || ch.budget;
			END IF;
		END IF;
		IF ch.rolling THEN
			DELETE FROM @.budget_charges g WHERE g.bucket = ch.bucket AND g.charged_us < ch.since_us - ch.retain_us;
		END IF;
		INSERT INTO @.budget_charges (bucket, tenant, tool, idempotency_key, created_at, cost, charged_us)
			VALUES (ch.bucket, p_tenant, p_tool, p_key, rec.created_at, ch.cost, ch.at_us);
		UPDATE @.budget_totals t SET total = t.total + ch.cost, expires_us = greatest(t.expires_us, ch.at_us + ch.retain_us)
			WHERE t.bucket = ch.bucket;
	END LOOP;
	RETURN true;
END
$fn$;
`

// budgetExceededState is the SQLSTATE charge() raises over a limit.
const budgetExceededState = "TGB01"

// chargesArg is charge()'s p_charges: NULL without charges.
func chargesArg(charges []idempotency.Charge) (*string, error) {
	if len(charges) == 0 {
		return nil, nil
	}
	type row struct {
		Bucket   string `json:"bucket"`
		Budget   string `json:"budget"`
		Limit    int64  `json:"lim"`
		Cost     int64  `json:"cost"`
		AtUS     int64  `json:"at_us"`
		SinceUS  int64  `json:"since_us"`
		RetainUS int64  `json:"retain_us"`
		Rolling  bool   `json:"rolling"`
	}
	rows := make([]row, len(charges))
	for i, c := range charges {
		rows[i] = row{c.Bucket, c.Budget, c.Limit, c.Cost, c.At.UnixMicro(), c.Since.UnixMicro(), c.Retain.Microseconds(), c.Rolling}
	}
	slices.SortFunc(rows, func(a, b row) int { return strings.Compare(a.Bucket, b.Bucket) })
	b, err := json.Marshal(rows)
	if err != nil {
		return nil, fmt.Errorf("encode budget charges: %w", err)
	}
	s := string(b)
	return &s, nil
}

// budgetExceeded reads charge()'s refusal from err; nil when err is
// another error.
func budgetExceeded(err error) *idempotency.BudgetExceeded {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != budgetExceededState {
		return nil
	}
	remaining, name, _ := strings.Cut(pgErr.Detail, " ")
	n, perr := strconv.ParseInt(remaining, 10, 64)
	if perr != nil {
		return &idempotency.BudgetExceeded{Budget: pgErr.Detail}
	}
	return &idempotency.BudgetExceeded{Budget: name, Remaining: n}
}

// releaseCharges wraps a statement deleting records (RETURNING r.*) so
// that the deleted records' budget reservations go with them, in the
// same statement; its command tag counts the records.
func releaseCharges(deleteRecords string) string {
	return `WITH d AS (` + deleteRecords + ` RETURNING r.tenant, r.tool, r.idempotency_key, r.created_at),
		g AS (DELETE FROM @.budget_charges g USING d WHERE g.tenant = d.tenant AND g.tool = d.tool
			AND g.idempotency_key = d.idempotency_key AND g.created_at = d.created_at RETURNING g.bucket, g.cost),
		t AS (UPDATE @.budget_totals t SET total = t.total - s.cost
			FROM (SELECT bucket, sum(cost) AS cost FROM g GROUP BY bucket) s WHERE t.bucket = s.bucket)
		SELECT 1 FROM d`
}

// BudgetUsage sums the bucket's rows of the window, and those whose
// record is not (still, the same life) COMPLETED as held.
func (s *Store) BudgetUsage(ctx context.Context, bucket string, since time.Time, rolling bool) (idempotency.BudgetUsage, error) {
	var u idempotency.BudgetUsage
	if err := s.ready(ctx); err != nil {
		return u, fmt.Errorf("pgstore: budget usage: %w", err)
	}
	from := int64(math.MinInt64)
	if rolling {
		from = since.UnixMicro()
	}
	err := s.pool.QueryRow(ctx, s.sql.budgetUsage, bucket, from).Scan(&u.Reserved, &u.Held)
	if err != nil {
		return idempotency.BudgetUsage{}, fmt.Errorf("pgstore: budget usage: %w", err)
	}
	return u, nil
}

// Reservations reads the live record's rows of budget_charges in its
// life, in one statement.
func (s *Store) Reservations(ctx context.Context, scope idempotency.Scope) ([]idempotency.Reservation, error) {
	if err := s.ready(ctx); err != nil {
		return nil, fmt.Errorf("pgstore: reservations %s: %w", scope, err)
	}
	rows, err := s.pool.Query(ctx, s.sql.reservations, scope.Tenant, scope.Tool, scope.Key)
	if err != nil {
		return nil, fmt.Errorf("pgstore: reservations %s: %w", scope, err)
	}
	found := false
	var out []idempotency.Reservation
	for rows.Next() {
		found = true
		var bucket *string
		var cost *int64
		if err := rows.Scan(&bucket, &cost); err != nil {
			rows.Close()
			return nil, fmt.Errorf("pgstore: reservations %s: %w", scope, err)
		}
		if bucket != nil && cost != nil {
			out = append(out, idempotency.Reservation{Budget: idempotency.BudgetOfBucket(*bucket), Cost: *cost})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: reservations %s: %w", scope, err)
	}
	if !found {
		return nil, idempotency.ErrNotFound
	}
	return out, nil
}
