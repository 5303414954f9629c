package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

var _ idempotency.Reconciler = (*Store)(nil)

// reconcileMigration is schema version 8: reconciliation. The reconcile
// lease, the attempts and resolved_by are columns of the record's own row,
// so they live and die with it: a record deleted (by an operator, by
// DropReconciled, by the sweep) and claimed again starts without them.
// Only UNKNOWN rows get a lease, and the claim function never turns an
// UNKNOWN row back into a claim, so it needs no change.
const reconcileMigration = `
ALTER TABLE @.records ADD COLUMN IF NOT EXISTS reconcile_owner text;
ALTER TABLE @.records ADD COLUMN IF NOT EXISTS reconcile_lease_until timestamptz;
ALTER TABLE @.records ADD COLUMN IF NOT EXISTS reconcile_count integer;   -- NULL: never claimed for reconciliation
ALTER TABLE @.records ADD COLUMN IF NOT EXISTS reconcile_attempts jsonb;  -- the latest attempts, oldest first
ALTER TABLE @.records ADD COLUMN IF NOT EXISTS resolved_by text;
`

// reconcileColumns are the reconciliation's columns, the last of
// recordColumns, so Get, List and every statement returning a record show
// them.
const reconcileColumns = `r.reconcile_owner, r.reconcile_lease_until, r.reconcile_count, r.reconcile_attempts, r.resolved_by`

// reconcileStatements are the reconciler's statements: the lease, an
// attempt, completion and drop, each one statement. $1–$3 are the scope.
type reconcileStatements struct {
	claim, attempt, complete, drop string
}

func newReconcileStatements(q func(string) string) reconcileStatements {
	const scope = `r.tenant = $1 AND r.tool = $2 AND r.idempotency_key = $3 AND r.expires_at > c.now`
	// held: $4 owner holds the reconcile lease of the UNKNOWN record with
	// fencing token $5.
	const held = scope + ` AND r.state = 'UNKNOWN' AND r.fencing_token = $5 AND r.reconcile_owner = $4`
	return reconcileStatements{
		// $4 owner, $5 lease µs. cur tells a missing record from one in
		// another state or leased by another owner; the update re-checks
		// its condition on the locked row. An abandoned IN_PROGRESS record
		// turns UNKNOWN for its replay TTL, as claim turns it under
		// lease_expiry 'unknown'.
		claim: q(`WITH c AS (SELECT clock_timestamp() AS now),
			cur AS (SELECT r.state = 'UNKNOWN' OR (r.state = 'IN_PROGRESS' AND r.lease_expires_at <= c.now) AS resolvable
				FROM @.records r, c WHERE ` + scope + `),
			upd AS (UPDATE @.records r
				SET state = 'UNKNOWN', owner = NULL, lease_expires_at = NULL,
					expires_at = CASE WHEN r.state = 'IN_PROGRESS'
						THEN c.now + r.replay_us * interval '1 microsecond' ELSE r.expires_at END,
					reconcile_owner = $4, reconcile_lease_until = c.now + $5 * interval '1 microsecond',
					reconcile_count = coalesce(r.reconcile_count, 0)
				FROM c
				WHERE ` + scope + `
					AND (r.state = 'UNKNOWN' OR (r.state = 'IN_PROGRESS' AND r.lease_expires_at <= c.now))
					AND (r.reconcile_owner IS NULL OR r.reconcile_owner = $4 OR r.reconcile_lease_until <= c.now)
				RETURNING ` + recordColumns + `)
			SELECT cur.resolvable, upd.* FROM (SELECT 1) one
				LEFT JOIN cur ON true LEFT JOIN upd ON true`),
		// $6 the attempt (JSON); the array keeps the latest $7.
		attempt: q(`WITH c AS (SELECT clock_timestamp() AS now)
			UPDATE @.records r
			SET reconcile_count = r.reconcile_count + 1,
				reconcile_attempts = (SELECT jsonb_agg(x.e ORDER BY x.i) FROM (
					SELECT e, i FROM jsonb_array_elements(coalesce(r.reconcile_attempts, '[]'::jsonb) || jsonb_build_array($6::jsonb))
						WITH ORDINALITY AS a(e, i)
					ORDER BY i DESC LIMIT $7) x)
			FROM c WHERE ` + held + `
			RETURNING ` + recordColumns),
		// $6 ttl µs, $7 status, $8 content type, $9 body.
		complete: q(`WITH c AS (SELECT clock_timestamp() AS now)
			UPDATE @.records r
			SET state = 'COMPLETED', expires_at = c.now + $6 * interval '1 microsecond',
				status = $7, content_type = $8, body = $9, canonical_arguments = NULL,
				resolved_by = '` + idempotency.ResolvedByReconcile + `',
				reconcile_owner = NULL, reconcile_lease_until = NULL
			FROM c WHERE ` + held + `
			RETURNING ` + recordColumns),
		drop: q(releaseCharges(`DELETE FROM @.records r USING (SELECT clock_timestamp() AS now) c WHERE ` + held)),
	}
}

// scannedReconciliation receives reconcileColumns.
type scannedReconciliation struct {
	owner      *string
	leaseUntil *time.Time
	count      *int32
	attempts   []byte
	resolvedBy *string
}

func (r *scannedReconciliation) dest() []any {
	return []any{&r.owner, &r.leaseUntil, &r.count, &r.attempts, &r.resolvedBy}
}

// storedAttempt is one element of reconcile_attempts.
type storedAttempt struct {
	At      time.Time `json:"t"`
	Outcome string    `json:"o"`
	Detail  string    `json:"d,omitempty"`
}

// apply sets rec's reconciliation (nil while the record was never claimed
// for reconciliation) and resolved_by. Only this store writes the attempts,
// from json.Marshal; should they not decode, the record still shows its
// count and lease.
func (r *scannedReconciliation) apply(rec *idempotency.Record) {
	rec.ResolvedBy = deref(r.resolvedBy)
	if r.count == nil {
		return
	}
	out := &idempotency.Reconciliation{Owner: deref(r.owner), LeaseUntil: deref(r.leaseUntil), Count: int(*r.count)}
	var stored []storedAttempt
	if len(r.attempts) > 0 && json.Unmarshal(r.attempts, &stored) == nil {
		for _, a := range stored {
			out.Attempts = append(out.Attempts, idempotency.ReconcileAttempt{At: a.At, Outcome: a.Outcome, Detail: a.Detail})
		}
	}
	rec.Reconciliation = out
}

// ClaimReconcile takes the record's reconcile lease for owner (see
// idempotency.Reconciler), turning an abandoned IN_PROGRESS record
// UNKNOWN: one statement.
func (s *Store) ClaimReconcile(ctx context.Context, scope idempotency.Scope, owner string, ttl time.Duration) (idempotency.Record, error) {
	op := "claim reconcile " + scope.String()
	if owner == "" || ttl <= 0 {
		return idempotency.Record{}, fmt.Errorf("pgstore: %s: owner and a positive ttl are required", op)
	}
	if err := s.ready(ctx); err != nil {
		return idempotency.Record{}, fmt.Errorf("pgstore: %s: %w", op, err)
	}
	var resolvable *bool
	var r scannedRecord
	dest := append([]any{&resolvable}, r.dest()...)
	if err := s.pool.QueryRow(ctx, s.sql.reconcile.claim, scope.Tenant, scope.Tool, scope.Key, owner, micros(ttl)).Scan(dest...); err != nil {
		return idempotency.Record{}, fmt.Errorf("pgstore: %s: %w", op, err)
	}
	switch {
	case r.tenant != nil:
		return r.record(true), nil
	case resolvable == nil:
		return idempotency.Record{}, idempotency.ErrNotFound
	case !*resolvable:
		return idempotency.Record{}, idempotency.ErrNotResolvable
	}
	// Resolvable but not updated: another owner's reconcile lease is alive
	// (or the record changed between the statement's read and its update;
	// the reconciler asks again at its next scan either way).
	return idempotency.Record{}, idempotency.ErrReconcileHeld
}

// RecordReconcileAttempt appends attempt to the record's reconciliation,
// keeping the latest idempotency.MaxReconcileAttemptsKept: one statement.
func (s *Store) RecordReconcileAttempt(ctx context.Context, scope idempotency.Scope, owner string, fencingToken int64, attempt idempotency.ReconcileAttempt) (idempotency.Record, error) {
	a, err := json.Marshal(storedAttempt{At: attempt.At, Outcome: attempt.Outcome, Detail: attempt.Detail})
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("pgstore: record reconcile attempt %s: %w", scope, err)
	}
	return s.heldRecord(ctx, "record reconcile attempt", s.sql.reconcile.attempt, scope, owner, fencingToken,
		string(a), idempotency.MaxReconcileAttemptsKept)
}

// CompleteReconciled completes the record with resp for ttl, resolved by
// reconcile: one statement.
func (s *Store) CompleteReconciled(ctx context.Context, scope idempotency.Scope, owner string, fencingToken int64, resp idempotency.StoredResponse, ttl time.Duration) (idempotency.Record, error) {
	if ttl <= 0 {
		return idempotency.Record{}, fmt.Errorf("pgstore: complete reconciled %s: ttl %v must be positive", scope, ttl)
	}
	body := resp.Body
	if body == nil {
		body = []byte{}
	}
	return s.heldRecord(ctx, "complete reconciled", s.sql.reconcile.complete, scope, owner, fencingToken,
		micros(ttl), int32(resp.Status), resp.ContentType, body)
}

// DropReconciled deletes the record, and with it its step, so the next
// call runs the tool: one DELETE under the lease's condition.
func (s *Store) DropReconciled(ctx context.Context, scope idempotency.Scope, owner string, fencingToken int64) error {
	op := "drop reconciled " + scope.String()
	if err := s.ready(ctx); err != nil {
		return fmt.Errorf("pgstore: %s: %w", op, err)
	}
	tag, err := s.pool.Exec(ctx, s.sql.reconcile.drop, scope.Tenant, scope.Tool, scope.Key, owner, fencingToken)
	if err != nil {
		return fmt.Errorf("pgstore: %s: %w", op, err)
	}
	if tag.RowsAffected() != 1 {
		return idempotency.ErrLeaseLost
	}
	return nil
}

// heldRecord runs query, an update of the record under scope while owner
// holds its reconcile lease with fencingToken, and returns the updated
// record, or ErrLeaseLost when nothing matched.
func (s *Store) heldRecord(ctx context.Context, op, query string, scope idempotency.Scope, owner string, fencingToken int64, more ...any) (idempotency.Record, error) {
	op += " " + scope.String()
	if err := s.ready(ctx); err != nil {
		return idempotency.Record{}, fmt.Errorf("pgstore: %s: %w", op, err)
	}
	var r scannedRecord
	args := append([]any{scope.Tenant, scope.Tool, scope.Key, owner, fencingToken}, more...)
	err := s.pool.QueryRow(ctx, query, args...).Scan(r.dest()...)
	if errors.Is(err, pgx.ErrNoRows) {
		return idempotency.Record{}, idempotency.ErrLeaseLost
	}
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("pgstore: %s: %w", op, err)
	}
	return r.record(true), nil
}
