// Package pgreceipts keeps receipt chains in PostgreSQL: a head row per
// tenant and a row per receipt (schema.go). An append is one statement, a
// compare-and-append on the head row, sealed in Go by
// [receipts.Appender] like every store.
package pgreceipts

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolgateway/toolgateway/gateway/receipts"
)

// Store is a [receipts.Store] on PostgreSQL.
type Store struct {
	*receipts.Appender
	pool   *pgxpool.Pool
	sql    statements
	schema string

	// created is set once the tables exist; creating them waits for the
	// first use, so a gateway starts while PostgreSQL is down.
	created  atomic.Bool
	creating sync.Mutex
}

var _ receipts.Store = (*Store)(nil)

// New returns a store in schema (which must exist); its tables are created
// on first use if they are missing. now is the clock of receipts appended
// without a time (nil: time.Now). It makes no request.
func New(_ context.Context, pool *pgxpool.Pool, schema string, now func() time.Time) (*Store, error) {
	s := &Store{pool: pool, sql: newStatements(schema), schema: schema}
	s.Appender = receipts.NewAppender(s, now)
	return s, nil
}

// ready creates the tables once, before the first statement that needs
// them; a failure is returned (the receipt writer retries) and tried again
// next time.
func (s *Store) ready(ctx context.Context) error {
	if s.created.Load() {
		return nil
	}
	s.creating.Lock()
	defer s.creating.Unlock()
	if s.created.Load() {
		return nil
	}
	if err := s.create(ctx); err != nil {
		return fmt.Errorf("pgreceipts: create tables in %s: %w", s.schema, err)
	}
	s.created.Store(true)
	return nil
}

// create runs the tables' DDL under a transaction-scoped advisory lock:
// CREATE TABLE IF NOT EXISTS is not safe against itself, and two replicas
// (or two stores of one process) may create at the same moment.
func (s *Store) create(ctx context.Context) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext($1))", "toolgateway receipts "+s.schema); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, qualifier(s.schema)(schemaSQL)); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// CompareAndAppend implements [receipts.Log]: one statement when the head
// is the expected one, a second to read the head when it moved.
func (s *Store) CompareAndAppend(ctx context.Context, tenant string, expected receipts.Head, run []receipts.Sealed) (receipts.Head, error) {
	last := run[len(run)-1].Receipt
	seqs, times, lines := make([]int64, len(run)), make([]int64, len(run)), make([]string, len(run))
	for i, r := range run {
		seqs[i], times[i], lines[i] = r.Receipt.Seq, r.Receipt.Time.UnixNano(), string(r.Line)
	}
	var ids []string
	var idTimes []int64
	for _, r := range run {
		if id := receipts.DedupeID(r.Receipt); id != "" {
			ids, idTimes = append(ids, id), append(idTimes, r.Receipt.Time.UnixNano())
		}
	}
	// appendFirst takes the expected head as NULLs: one argument list.
	args := []any{tenant, last.Seq, last.Hash, times, lines, seqs, nil, nil, ids, idTimes}
	stmt := s.sql.appendFirst
	if expected.Seq != 0 {
		stmt = s.sql.appendNext
		args[6], args[7] = expected.Seq, expected.Hash
	}
	if err := s.ready(ctx); err != nil {
		return receipts.Head{}, err
	}
	tag, err := s.pool.Exec(ctx, stmt, args...)
	if err != nil {
		return receipts.Head{}, fmt.Errorf("pgreceipts: append: %w", err)
	}
	if tag.RowsAffected() == int64(len(run)) {
		return receipts.HeadOf(last), nil
	}
	current, headTime, err := s.readHead(ctx, tenant)
	if err != nil {
		return receipts.Head{}, err
	}
	if current != expected || len(ids) == 0 {
		moved := &receipts.HeadMovedError{}
		if headTime != 0 {
			moved.HeadTime = time.Unix(0, headTime)
		}
		return current, moved
	}
	return current, s.duplicates(ctx, tenant, ids)
}

// readHead reads tenant's head row, restoring it from the last receipt
// when it is missing while receipts remain.
// It answers the head receipt's time too (Unix ns, 0: gone).
func (s *Store) readHead(ctx context.Context, tenant string) (receipts.Head, int64, error) {
	var current receipts.Head
	var headTime int64
	err := s.pool.QueryRow(ctx, s.sql.head, tenant).Scan(&current.Seq, &current.Hash, &headTime)
	if errors.Is(err, pgx.ErrNoRows) {
		if _, err := s.pool.Exec(ctx, s.sql.restoreHead, tenant); err != nil {
			return receipts.Head{}, 0, fmt.Errorf("pgreceipts: restore head: %w", err)
		}
		err = s.pool.QueryRow(ctx, s.sql.head, tenant).Scan(&current.Seq, &current.Hash, &headTime)
	}
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return receipts.Head{}, 0, fmt.Errorf("pgreceipts: read head: %w", err)
	}
	return current, headTime, nil
}

// duplicates names the ids already indexed for tenant: the reason an
// append at the expected head wrote nothing. None (the head moved and
// came back, which a chain cannot do) is ErrHeadMoved: the caller retries.
func (s *Store) duplicates(ctx context.Context, tenant string, ids []string) error {
	rows, err := s.pool.Query(ctx, s.sql.duplicates, tenant, ids)
	if err != nil {
		return fmt.Errorf("pgreceipts: read executions: %w", err)
	}
	dup, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("pgreceipts: read executions: %w", err)
	}
	if len(dup) == 0 {
		return receipts.ErrHeadMoved
	}
	return &receipts.DuplicateError{ExecutionIDs: dup}
}

// Tenants implements [receipts.Store].
func (s *Store) Tenants(ctx context.Context) ([]string, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	tenants, err := s.texts(ctx, s.sql.tenants)
	if err != nil {
		return nil, fmt.Errorf("pgreceipts: tenants: %w", err)
	}
	return tenants, nil
}

// texts runs query and answers its one text column, row by row.
func (s *Store) texts(ctx context.Context, query string, args ...any) ([]string, error) {
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// List implements [receipts.Store]: one query of at most Limit+1 rows
// after the cursor; filters apply to the page read.
func (s *Store) List(ctx context.Context, f receipts.Filter) ([]receipts.Receipt, int64, error) {
	f, err := f.Normalize()
	if err != nil {
		return nil, 0, err
	}
	if err := s.ready(ctx); err != nil {
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

// Lines implements [receipts.Store]: the list query, lines as stored.
func (s *Store) Lines(ctx context.Context, tenant string, after int64, limit int) ([][]byte, int64, error) {
	if err := s.ready(ctx); err != nil {
		return nil, 0, err
	}
	rows, err := s.pool.Query(ctx, s.sql.list, tenant, after, limit+1)
	if err != nil {
		return nil, 0, fmt.Errorf("pgreceipts: lines of %s: %w", tenant, err)
	}
	type row struct {
		Seq  int64
		Line string
	}
	read, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	if err != nil {
		return nil, 0, fmt.Errorf("pgreceipts: lines of %s: %w", tenant, err)
	}
	var next int64
	if len(read) > limit {
		read = read[:limit]
		next = read[limit-1].Seq
	}
	lines := make([][]byte, len(read))
	for i, r := range read {
		lines[i] = []byte(r.Line)
	}
	return lines, next, nil
}

// Expire implements [receipts.Store]: one statement over every tenant.
func (s *Store) Expire(ctx context.Context, before time.Time) (int, error) {
	if err := s.ready(ctx); err != nil {
		return 0, err
	}
	tag, err := s.pool.Exec(ctx, s.sql.expire, before.UnixNano())
	if err != nil {
		return 0, fmt.Errorf("pgreceipts: expire: %w", err)
	}
	if _, err := s.pool.Exec(ctx, s.sql.expireIndex, before.UnixNano()); err != nil {
		return int(tag.RowsAffected()), fmt.Errorf("pgreceipts: expire executions: %w", err)
	}
	if _, err := s.pool.Exec(ctx, s.sql.expireCheckpoints); err != nil {
		return int(tag.RowsAffected()), fmt.Errorf("pgreceipts: expire checkpoints: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// PutCheckpoint implements [receipts.CheckpointStore].
func (s *Store) PutCheckpoint(ctx context.Context, c receipts.Checkpoint) error {
	line, err := receipts.EncodeCheckpoint(c)
	if err != nil {
		return err
	}
	if err := s.ready(ctx); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, s.sql.putCheckpoint, c.Tenant, c.Seq, c.Hash, c.KeyID, string(line)); err != nil {
		return fmt.Errorf("pgreceipts: put checkpoint of %s: %w", c.Tenant, err)
	}
	return nil
}

// Checkpoints implements [receipts.CheckpointStore].
func (s *Store) Checkpoints(ctx context.Context, tenant string) ([]receipts.Checkpoint, error) {
	return s.readCheckpoints(ctx, s.sql.checkpoints, tenant)
}

// LatestCheckpoints implements [receipts.CheckpointStore].
func (s *Store) LatestCheckpoints(ctx context.Context, tenant string) ([]receipts.Checkpoint, error) {
	return s.readCheckpoints(ctx, s.sql.latestCheckpoints, tenant)
}

// readCheckpoints runs query, whose rows are checkpoint lines of tenant.
func (s *Store) readCheckpoints(ctx context.Context, query, tenant string) ([]receipts.Checkpoint, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	lines, err := s.texts(ctx, query, tenant)
	if err != nil {
		return nil, fmt.Errorf("pgreceipts: checkpoints of %s: %w", tenant, err)
	}
	out, err := receipts.DecodeCheckpoints(lines)
	if err != nil {
		return nil, fmt.Errorf("pgreceipts: checkpoints of %s: %w", tenant, err)
	}
	return out, nil
}

// CheckpointTenants implements [receipts.CheckpointStore].
func (s *Store) CheckpointTenants(ctx context.Context) ([]string, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	tenants, err := s.texts(ctx, s.sql.checkpointTenants)
	if err != nil {
		return nil, fmt.Errorf("pgreceipts: checkpoint index: %w", err)
	}
	return tenants, nil
}

// LastReceipt implements [receipts.CheckpointStore].
func (s *Store) LastReceipt(ctx context.Context, tenant string) (receipts.Receipt, bool, error) {
	if err := s.ready(ctx); err != nil {
		return receipts.Receipt{}, false, err
	}
	var line string
	err := s.pool.QueryRow(ctx, s.sql.last, tenant).Scan(&line)
	if errors.Is(err, pgx.ErrNoRows) {
		return receipts.Receipt{}, false, nil
	}
	if err != nil {
		return receipts.Receipt{}, false, fmt.Errorf("pgreceipts: last receipt of %s: %w", tenant, err)
	}
	r, err := receipts.Decode([]byte(line))
	if err != nil {
		return receipts.Receipt{}, false, fmt.Errorf("pgreceipts: last receipt of %s: %w", tenant, err)
	}
	return r, true, nil
}
