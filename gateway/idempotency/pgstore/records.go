package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// Get returns the record under scope, or ErrNotFound (also for a row that
// expired and awaits the sweep).
func (s *Store) Get(ctx context.Context, scope idempotency.Scope) (idempotency.Record, error) {
	return s.queryRecord(ctx, "get "+scope.String(), s.sql.get, scope.Tenant, scope.Tool, scope.Key)
}

// queryRecord runs query, which selects at most one live row, and returns
// its record with the response, or ErrNotFound; op names the operation in
// errors.
func (s *Store) queryRecord(ctx context.Context, op, query string, args ...any) (idempotency.Record, error) {
	if err := s.ready(ctx); err != nil {
		return idempotency.Record{}, fmt.Errorf("pgstore: %s: %w", op, err)
	}
	var r scannedRecord
	err := s.pool.QueryRow(ctx, query, args...).Scan(r.dest()...)
	if errors.Is(err, pgx.ErrNoRows) {
		return idempotency.Record{}, idempotency.ErrNotFound
	}
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("pgstore: %s: %w", op, err)
	}
	return r.record(true), nil
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
