// Package pgreceipts keeps receipt chains in PostgreSQL: a head row per
// tenant and a row per receipt (schema.go). An append is one statement, a
// compare-and-append on the head row, sealed in Go by
// [receipts.Appender] like every store.
package pgreceipts

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolgateway/toolgateway/gateway/receipts"
)

// Store is a [receipts.Store] on PostgreSQL.
type Store struct {
	*receipts.Appender
	pool *pgxpool.Pool
	sql  statements
}

var _ receipts.Store = (*Store)(nil)

// New returns a store in schema (which must exist), creating its tables if
// they are missing; now is the clock of receipts appended without a time
// (nil: time.Now).
func New(ctx context.Context, pool *pgxpool.Pool, schema string, now func() time.Time) (*Store, error) {
	if _, err := pool.Exec(ctx, qualifier(schema)(schemaSQL)); err != nil {
		return nil, fmt.Errorf("pgreceipts: create tables in %s: %w", schema, err)
	}
	s := &Store{pool: pool, sql: newStatements(schema)}
	s.Appender = receipts.NewAppender(s, now)
	return s, nil
}

// CompareAndAppend implements [receipts.Log]: one statement when the head
// is the expected one, a second to read the head when it moved.
func (s *Store) CompareAndAppend(ctx context.Context, tenant string, expected receipts.Head, run []receipts.Sealed) (receipts.Head, error) {
	last := run[len(run)-1].Receipt
	seqs, times, lines := make([]int64, len(run)), make([]int64, len(run)), make([]string, len(run))
	for i, r := range run {
		seqs[i], times[i], lines[i] = r.Receipt.Seq, r.Receipt.Time.UnixNano(), string(r.Line)
	}
	args := []any{tenant, last.Seq, last.Hash, times, lines, seqs}
	stmt := s.sql.appendFirst
	if expected.Seq != 0 {
		stmt = s.sql.appendNext
		args = append(args, expected.Seq, expected.Hash)
	}
	tag, err := s.pool.Exec(ctx, stmt, args...)
	if err != nil {
		return receipts.Head{}, fmt.Errorf("pgreceipts: append: %w", err)
	}
	if tag.RowsAffected() == int64(len(run)) {
		return receipts.HeadOf(last), nil
	}
	var current receipts.Head
	err = s.pool.QueryRow(ctx, s.sql.head, tenant).Scan(&current.Seq, &current.Hash)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return receipts.Head{}, fmt.Errorf("pgreceipts: read head: %w", err)
	}
	return current, receipts.ErrHeadMoved
}

// Tenants implements [receipts.Store].
func (s *Store) Tenants(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, s.sql.tenants)
	if err != nil {
		return nil, fmt.Errorf("pgreceipts: tenants: %w", err)
	}
	tenants, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("pgreceipts: tenants: %w", err)
	}
	return tenants, nil
}

// List implements [receipts.Store]: one query of at most Limit+1 rows
// after the cursor; filters apply to the page read.
func (s *Store) List(ctx context.Context, f receipts.Filter) ([]receipts.Receipt, int64, error) {
	f, err := f.Normalize()
	if err != nil {
		return nil, 0, err
	}
	rows, err := s.pool.Query(ctx, s.sql.list, f.Tenant, f.After, f.Limit+1)
	if err != nil {
		return nil, 0, fmt.Errorf("pgreceipts: list %s: %w", f.Tenant, err)
	}
	type row struct {
		Seq  int64
		Line string
	}
	read, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	if err != nil {
		return nil, 0, fmt.Errorf("pgreceipts: list %s: %w", f.Tenant, err)
	}
	var next int64
	if len(read) > f.Limit {
		read = read[:f.Limit]
		next = read[f.Limit-1].Seq
	}
	var page []receipts.Receipt
	for _, r := range read {
		rec, err := receipts.Decode([]byte(r.Line))
		if err != nil {
			return nil, 0, fmt.Errorf("pgreceipts: %s seq %d: %w", f.Tenant, r.Seq, err)
		}
		if f.Match(rec) {
			page = append(page, rec)
		}
	}
	return page, next, nil
}

// Expire implements [receipts.Store]: one statement over every tenant.
func (s *Store) Expire(ctx context.Context, before time.Time) (int, error) {
	tag, err := s.pool.Exec(ctx, s.sql.expire, before.UnixNano())
	if err != nil {
		return 0, fmt.Errorf("pgreceipts: expire: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
