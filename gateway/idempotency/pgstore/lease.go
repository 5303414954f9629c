package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// Renew extends the lease to ttl from now (the database's clock) if the
// caller still owns the record: one owner-checked UPDATE.
func (s *Store) Renew(ctx context.Context, lease idempotency.Lease, ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("pgstore: renew %s: ttl %v must be positive", lease.Scope, ttl)
	}
	if err := s.ready(ctx); err != nil {
		return ownedResult("renew", lease, pgconn.CommandTag{}, err)
	}
	tag, err := s.pool.Exec(ctx, s.sql.renew, ownerArgs(lease, micros(ttl))...)
	return ownedResult("renew", lease, tag, err)
}

// Complete stores resp as COMPLETED for ttl if the caller still owns the
// record: one owner-checked UPDATE. The record keeps its step.
func (s *Store) Complete(ctx context.Context, lease idempotency.Lease, resp idempotency.StoredResponse, ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("pgstore: complete %s: ttl %v must be positive", lease.Scope, ttl)
	}
	if err := s.ready(ctx); err != nil {
		return ownedResult("complete", lease, pgconn.CommandTag{}, err)
	}
	stmt, args := s.completion(lease, resp, ttl)
	tag, err := s.pool.Exec(ctx, stmt, args...)
	return ownedResult("complete", lease, tag, err)
}

// MarkUnknown turns the caller's IN_PROGRESS record UNKNOWN for ttl if the
// caller still owns it (an expired lease nobody took over included): one
// owner-checked UPDATE. The record keeps its step.
func (s *Store) MarkUnknown(ctx context.Context, lease idempotency.Lease, ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("pgstore: mark unknown %s: ttl %v must be positive", lease.Scope, ttl)
	}
	if err := s.ready(ctx); err != nil {
		return ownedResult("mark unknown", lease, pgconn.CommandTag{}, err)
	}
	tag, err := s.pool.Exec(ctx, s.sql.markUnknown, ownerArgs(lease, micros(ttl))...)
	return ownedResult("mark unknown", lease, tag, err)
}

// Release deletes the record, and with it its step, if the caller still
// owns it: one owner-checked DELETE.
func (s *Store) Release(ctx context.Context, lease idempotency.Lease) error {
	if err := s.ready(ctx); err != nil {
		return ownedResult("release", lease, pgconn.CommandTag{}, err)
	}
	tag, err := s.pool.Exec(ctx, s.sql.release, ownerArgs(lease)...)
	return ownedResult("release", lease, tag, err)
}

// ownerArgs are the owner check's arguments ($1–$5) followed by more.
func ownerArgs(lease idempotency.Lease, more ...any) []any {
	return append([]any{lease.Scope.Tenant, lease.Scope.Tool, lease.Scope.Key, lease.Owner, lease.FencingToken}, more...)
}

// completeArgs are the arguments of the complete statement. A nil body is
// stored as an empty one: COMPLETED always has a body, maybe of 0 bytes.
// The last says whether the record keeps its canonical arguments.
func completeArgs(lease idempotency.Lease, resp idempotency.StoredResponse, ttl time.Duration) []any {
	body := resp.Body
	if body == nil {
		body = []byte{}
	}
	return ownerArgs(lease, micros(ttl), int32(resp.Status), resp.ContentType, body, lease.KeepArguments)
}

// ownedResult maps an owner-checked statement's result to the Store's
// errors: no row matched means the lease is lost.
func ownedResult(op string, lease idempotency.Lease, tag pgconn.CommandTag, err error) error {
	switch {
	case err != nil:
		return fmt.Errorf("pgstore: %s %s: %w", op, lease.Scope, err)
	case tag.RowsAffected() != 1:
		return idempotency.ErrLeaseLost
	}
	return nil
}
