package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// A record's identity (idempotency.ClaimRequest.Identity) is a column of
// its row, written by the claim that creates the row: the claim function
// and an UPDATE of the row it wrote, sent as one batch, which PostgreSQL
// runs as one implicit transaction (one Sync), so the row never commits
// without it. Only claims that carry one (host call ids, fingerprints)
// send the UPDATE; the gateway's own identity stores nothing.

// identityMigration is schema version 12: the identity column.
const identityMigration = `ALTER TABLE @.records ADD COLUMN IF NOT EXISTS identity text;`

// identityColumn is read with recordColumns, last.
const identityColumn = `r.identity`

// keepIdentity writes the identity of the row a claim just created or
// took over ($4: its execution id; a replay or a refusal matches no row
// of that id, and an approval consumed keeps the identity it has).
const keepIdentity = `UPDATE @.records SET identity = $5
	WHERE tenant = $1 AND tool = $2 AND idempotency_key = $3 AND execution_id = $4 AND identity IS DISTINCT FROM $5`

// queryClaim runs the claim statement with args into dest, with the
// UPDATE of its identity in the same transaction when req has one.
func (s *Store) queryClaim(ctx context.Context, req idempotency.ClaimRequest, statement string, args, dest []any) error {
	if req.Identity == "" {
		return s.pool.QueryRow(ctx, statement, args...).Scan(dest...)
	}
	batch := &pgx.Batch{}
	batch.Queue(statement, args...).QueryRow(func(row pgx.Row) error { return row.Scan(dest...) })
	batch.Queue(s.sql.keepIdentity, req.Scope.Tenant, req.Scope.Tool, req.Scope.Key, req.ExecutionID, req.Identity)
	return s.pool.SendBatch(ctx, batch).Close()
}

// KeepsIdentity: records keep their identity (idempotency.IdentityKeeper).
func (s *Store) KeepsIdentity() bool { return true }
