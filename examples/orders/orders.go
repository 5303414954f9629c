// Package orders is an example of a transactional tool: place-order writes
// one row into an orders table of the gateway's own PostgreSQL database, in
// the transaction the gateway records the call's outcome in. The row and
// the replayable record commit together or not at all, so a gateway killed
// at any instant leaves either both (the retry replays) or neither (the
// retry runs the tool again): one order per agent step, without an
// Idempotency-Key check of the tool's own. Program ordersgateway serves it;
// the chaos test of internal/chaos kills that program under load and
// counts the rows.
package orders

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/tools/pgxtx"
)

// Tool is the transactional place-order tool.
type Tool struct {
	// Table is the orders table, schema-qualified if need be (see
	// CreateTable).
	Table string
	// DB, when set, is where the tool creates Table (CreateTable) before
	// its first insert, outside the call's transaction, so that a program
	// started while PostgreSQL was down serves orders once it answers.
	// Nil: Table must exist.
	DB Execer

	tableMu    sync.Mutex
	tableReady atomic.Bool
}

// Execer runs one SQL statement: a *pgx.Conn, a *pgxpool.Pool.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Spec declares the tool transactional: the gateway hands it a
// transaction (on the PostgreSQL store only; other stores refuse it).
func (t *Tool) Spec() tools.Spec {
	return tools.Spec{
		Name:          "place-order",
		Description:   "Place an order for a SKU (one row per agent step)",
		InputSchema:   json.RawMessage(`{"type":"object","properties":{"sku":{"type":"string","minLength":1}},"required":["sku"]}`),
		Transactional: true,
	}
}

// Call inserts the order in the call's transaction and answers with it.
// It neither commits nor rolls back: the gateway does, with the outcome.
func (t *Tool) Call(ctx context.Context, req *tools.Request) (*tools.Response, error) {
	if err := t.EnsureTable(ctx); err != nil {
		// Nothing was written: the gateway answers 502
		// upstream_unreachable and stores nothing; the client's retry runs
		// the tool again. (A PostgreSQL that refuses the table stopped
		// ordersgateway at start, so what fails here is reaching it.)
		return nil, fmt.Errorf("place-order: %w: %w", tools.ErrUpstreamUnreachable, err)
	}
	tx, err := pgxtx.From(req)
	if err != nil {
		return nil, err
	}
	var args struct {
		SKU string `json:"sku"`
	}
	if err := json.Unmarshal(req.Arguments, &args); err != nil {
		return nil, fmt.Errorf("place-order: arguments: %w", err)
	}
	var id int64
	err = tx.QueryRow(ctx, `INSERT INTO `+t.Table+` (session_id, step_index, execution_id, sku)
		VALUES ($1, $2, $3, $4) RETURNING id`,
		req.SessionID, int64(req.StepIndex), req.ExecutionID, args.SKU).Scan(&id)
	if err != nil {
		return nil, fmt.Errorf("place-order: insert: %w", err)
	}
	body, err := json.Marshal(map[string]any{"order_id": id, "sku": args.SKU})
	if err != nil {
		return nil, err
	}
	return &tools.Response{Status: 201, ContentType: "application/json", Body: body}, nil
}

// EnsureTable creates Table in DB unless it did so already (or DB is nil).
// Calls wait for each other, and a failure is tried again by the next call.
func (t *Tool) EnsureTable(ctx context.Context) error {
	if t.DB == nil || t.tableReady.Load() {
		return nil
	}
	t.tableMu.Lock()
	defer t.tableMu.Unlock()
	if t.tableReady.Load() {
		return nil
	}
	if err := CreateTable(ctx, t.DB, t.Table); err != nil {
		return err
	}
	t.tableReady.Store(true)
	return nil
}

// CreateTable creates the orders table if it does not exist. It has no
// unique constraint on the step on purpose: exactly one row per step comes
// from the gateway, and the chaos test proves it by counting.
func CreateTable(ctx context.Context, db Execer, table string) error {
	_, err := db.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+table+` (
		id           bigserial PRIMARY KEY,
		session_id   text   NOT NULL,
		step_index   bigint NOT NULL,
		execution_id text   NOT NULL,
		sku          text   NOT NULL)`)
	if err != nil {
		return fmt.Errorf("orders: create table %s: %w", table, err)
	}
	return nil
}
