package pgstore

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

var _ idempotency.Admin = (*Store)(nil)

// ListsNewestFirst reports that List orders records newest first (by
// creation time, then scope), which the conformance suite checks.
func (s *Store) ListsNewestFirst() bool { return true }

// scannedRecord receives recordColumns; every field is nullable because
// the resolve statement's outer join yields NULLs when nothing was updated.
type scannedRecord struct {
	tenant, tool, key, state, fingerprint, executionID *string
	fencing                                            *int64
	createdAt, leaseExpiresAt, expiresAt               *time.Time
	sessionID                                          *string
	stepIndex                                          *int64
	status                                             *int32
	contentType                                        *string
	body                                               []byte
	arguments                                          *string
	approval                                           scannedApproval
	approvalUseUS                                      *int64
	reconcile                                          scannedReconciliation
	identity                                           *string
}

func (r *scannedRecord) dest() []any {
	dest := []any{&r.tenant, &r.tool, &r.key, &r.state, &r.fingerprint, &r.executionID,
		&r.fencing, &r.createdAt, &r.leaseExpiresAt, &r.expiresAt, &r.sessionID, &r.stepIndex,
		&r.status, &r.contentType, &r.body, &r.arguments}
	return append(append(append(append(dest, r.approval.dest()...), &r.approvalUseUS), r.reconcile.dest()...), &r.identity)
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// record converts the row; withResponse keeps a COMPLETED record's
// response and the record's canonical arguments (an open record's, or a
// COMPLETED one's kept by Lease.KeepArguments: every other completion
// sets the column NULL); lists leave both out.
func (r *scannedRecord) record(withResponse bool) idempotency.Record {
	rec := idempotency.Record{
		Scope:        idempotency.Scope{Tenant: deref(r.tenant), Tool: deref(r.tool), Key: deref(r.key)},
		State:        idempotency.State(deref(r.state)),
		Fingerprint:  deref(r.fingerprint),
		ExecutionID:  deref(r.executionID),
		FencingToken: deref(r.fencing),
		CreatedAt:    deref(r.createdAt),
		ExpiresAt:    deref(r.expiresAt),
	}
	if rec.State == idempotency.StateInProgress && r.leaseExpiresAt != nil {
		rec.LeaseExpiresAt = *r.leaseExpiresAt
	}
	if r.sessionID != nil && r.stepIndex != nil && *r.stepIndex >= 0 {
		rec.Step = &idempotency.Step{SessionID: *r.sessionID, Index: uint64(*r.stepIndex)}
	}
	if withResponse && r.arguments != nil {
		rec.CanonicalArguments = []byte(*r.arguments)
	}
	if withResponse && rec.State == idempotency.StateCompleted && r.status != nil {
		rec.Response = &idempotency.StoredResponse{Status: int(*r.status), ContentType: deref(r.contentType), Body: r.body}
	}
	rec.Approval = r.approval.approval(r.approvalUseUS)
	rec.Requester = deref(r.approval.requester)
	r.reconcile.apply(&rec)
	rec.Identity = deref(r.identity)
	return rec
}

// listCursor is the position after the last record of a page, in the
// listing's order; encoded as base64url JSON, opaque to callers.
type listCursor struct {
	CreatedAt time.Time `json:"c"`
	Tenant    string    `json:"tn"`
	Tool      string    `json:"tl"`
	Key       string    `json:"k"`
}

func (c listCursor) encode() (string, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("encode cursor: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func decodeCursor(s string) (listCursor, error) {
	var c listCursor
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	// PostgreSQL text holds no NUL: a cursor with one would fail the
	// query as if the database were down.
	if err != nil || c.CreatedAt.IsZero() || strings.ContainsRune(c.Tenant+c.Tool+c.Key, 0) {
		return listCursor{}, fmt.Errorf("malformed cursor: %w", idempotency.ErrInvalidCursor)
	}
	return c, nil
}

// List returns one page of live records matching filter, newest first, in
// one statement: a keyset page on (created_at, tenant, tool,
// idempotency_key) descending, which the indexes of schema version 2 serve
// for each filter (state UNKNOWN/IN_PROGRESS, tenant, tool, tenant +
// session). A session filter requires a tenant (the session index is
// scoped by tenant). The statement text depends only on which filters are
// set, so each shape is prepared once and planned for its own index.
func (s *Store) List(ctx context.Context, filter idempotency.ListFilter) (idempotency.Page, error) {
	return s.list(ctx, filter, false)
}

// list is List, of the rows carrying an approval only when approvalsOnly.
func (s *Store) list(ctx context.Context, filter idempotency.ListFilter, approvalsOnly bool) (idempotency.Page, error) {
	if filter.Limit < 1 || filter.Limit > idempotency.MaxListLimit {
		return idempotency.Page{}, fmt.Errorf("pgstore: list: limit %d: want 1 … %d", filter.Limit, idempotency.MaxListLimit)
	}
	if filter.SessionID != "" && filter.Tenant == "" {
		return idempotency.Page{}, fmt.Errorf("pgstore: list: a session filter requires a tenant: %w", idempotency.ErrInvalidCursor)
	}
	sql, args, err := s.listStatement(filter, approvalsOnly)
	if err != nil {
		return idempotency.Page{}, fmt.Errorf("pgstore: list: %w", err)
	}
	if err := s.ready(ctx); err != nil {
		return idempotency.Page{}, fmt.Errorf("pgstore: list: %w", err)
	}
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return idempotency.Page{}, fmt.Errorf("pgstore: list: %w", err)
	}
	var page idempotency.Page
	for rows.Next() {
		var r scannedRecord
		if err := rows.Scan(r.dest()...); err != nil {
			rows.Close()
			return idempotency.Page{}, fmt.Errorf("pgstore: list: %w", err)
		}
		rec := r.record(false)
		if approvalsOnly {
			rec = idempotency.ApprovalView(rec)
		}
		page.Records = append(page.Records, rec)
	}
	if err := rows.Err(); err != nil {
		return idempotency.Page{}, fmt.Errorf("pgstore: list: %w", err)
	}
	if len(page.Records) > filter.Limit {
		page.Records = page.Records[:filter.Limit]
		last := page.Records[len(page.Records)-1]
		page.Cursor, err = listCursor{last.CreatedAt, last.Scope.Tenant, last.Scope.Tool, last.Scope.Key}.encode()
		if err != nil {
			return idempotency.Page{}, fmt.Errorf("pgstore: list: %w", err)
		}
	}
	return page, nil
}

// FindExecution looks the execution id up in records_execution, in any
// tenant, and returns the record with its response.
func (s *Store) FindExecution(ctx context.Context, executionID string) (idempotency.Record, error) {
	return s.queryRecord(ctx, "find execution", s.sql.findExecution, executionID)
}

// Resolve turns an UNKNOWN record, or an IN_PROGRESS one whose lease ran
// out (on the database's clock), into COMPLETED with resp for ttl, in one
// statement. Execution id, fingerprint, fencing token and step stay.
func (s *Store) Resolve(ctx context.Context, scope idempotency.Scope, resp idempotency.StoredResponse, ttl time.Duration) (idempotency.Record, error) {
	if ttl <= 0 {
		return idempotency.Record{}, fmt.Errorf("pgstore: resolve %s: ttl %v must be positive", scope, ttl)
	}
	if err := s.ready(ctx); err != nil {
		return idempotency.Record{}, fmt.Errorf("pgstore: resolve %s: %w", scope, err)
	}
	body := resp.Body
	if body == nil {
		body = []byte{}
	}
	var (
		found bool
		r     scannedRecord
	)
	err := s.pool.QueryRow(ctx, s.sql.resolve, scope.Tenant, scope.Tool, scope.Key, micros(ttl),
		resp.Status, resp.ContentType, body).Scan(append([]any{&found}, r.dest()...)...)
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("pgstore: resolve %s: %w", scope, err)
	}
	switch {
	case !found:
		return idempotency.Record{}, idempotency.ErrNotFound
	case r.state == nil:
		return idempotency.Record{}, idempotency.ErrNotResolvable
	}
	return r.record(true), nil
}

// listStatement builds List's statement for filter: only the conditions of
// the filters that are set, so the planner picks the index of each shape.
func (s *Store) listStatement(filter idempotency.ListFilter, approvalsOnly bool) (string, []any, error) {
	var (
		where []string
		args  []any
	)
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	where = append(where, "r.expires_at > clock_timestamp()")
	switch filter.State {
	case "":
	case idempotency.StateInProgress, idempotency.StateCompleted, idempotency.StateUnknown,
		idempotency.StateAwaitingApproval, idempotency.StateApproved, idempotency.StateDenied, idempotency.StateExpired,
		idempotency.StateConsumed:
		// Literals, not parameters: only then can a generic plan use the
		// partial index of the open states.
		where = append(where, listState(filter.State))
	default:
		return "", nil, fmt.Errorf("unknown state %q: %w", filter.State, idempotency.ErrInvalidCursor)
	}
	if approvalsOnly {
		where = append(where, "r.approval_id IS NOT NULL")
	}
	if filter.Tenant != "" {
		where = append(where, "r.tenant = "+arg(filter.Tenant))
	}
	if filter.Tool != "" {
		where = append(where, "r.tool = "+arg(filter.Tool))
	}
	if filter.SessionID != "" {
		where = append(where, "r.session_id = "+arg(filter.SessionID))
	}
	if filter.Cursor != "" {
		c, err := decodeCursor(filter.Cursor)
		if err != nil {
			return "", nil, err
		}
		where = append(where, fmt.Sprintf("(r.created_at, r.tenant, r.tool, r.idempotency_key) < (%s, %s, %s, %s)",
			arg(c.CreatedAt), arg(c.Tenant), arg(c.Tool), arg(c.Key)))
	}
	// One row more than the page tells whether another page follows.
	limit := arg(filter.Limit + 1)
	sql := qualifier(s.schema)(`SELECT ` + recordColumns + ` FROM @.records r WHERE ` + strings.Join(where, " AND ") +
		` ORDER BY r.created_at DESC, r.tenant DESC, r.tool DESC, r.idempotency_key DESC LIMIT ` + limit)

	return sql, args, nil
}
