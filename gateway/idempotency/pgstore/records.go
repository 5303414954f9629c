package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// Get returns the record under scope, or ErrNotFound (also for a row that
// expired and awaits the sweep).
func (s *Store) Get(ctx context.Context, scope idempotency.Scope) (idempotency.Record, error) {
	if err := s.ready(ctx); err != nil {
		return idempotency.Record{}, fmt.Errorf("pgstore: get %s: %w", scope, err)
	}
	rec := idempotency.Record{Scope: scope}
	var (
		state       string
		lease       *time.Time
		status      *int32
		contentType *string
		body        []byte
	)
	err := s.pool.QueryRow(ctx, s.sql.get, scope.Tenant, scope.Tool, scope.Key).Scan(
		&state, &rec.Fingerprint, &rec.ExecutionID, &rec.FencingToken, &rec.CreatedAt,
		&lease, &rec.ExpiresAt, &status, &contentType, &body)
	if errors.Is(err, pgx.ErrNoRows) {
		return idempotency.Record{}, idempotency.ErrNotFound
	}
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("pgstore: get %s: %w", scope, err)
	}
	rec.State = idempotency.State(state)
	if rec.State == idempotency.StateInProgress && lease != nil {
		rec.LeaseExpiresAt = *lease
	}
	if rec.State == idempotency.StateCompleted && status != nil {
		rec.Response = &idempotency.StoredResponse{Status: int(*status), Body: body}
		if contentType != nil {
			rec.Response.ContentType = *contentType
		}
	}
	return rec, nil
}

// Delete removes the record under scope, and with it its step, or returns
// ErrNotFound.
func (s *Store) Delete(ctx context.Context, scope idempotency.Scope) error {
	if err := s.ready(ctx); err != nil {
		return fmt.Errorf("pgstore: delete %s: %w", scope, err)
	}
	tag, err := s.pool.Exec(ctx, s.sql.delete, scope.Tenant, scope.Tool, scope.Key)
	if err != nil {
		return fmt.Errorf("pgstore: delete %s: %w", scope, err)
	}
	if tag.RowsAffected() == 0 {
		return idempotency.ErrNotFound
	}
	return nil
}
