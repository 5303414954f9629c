// Package pgxtx hands a transactional tool its PostgreSQL transaction. It
// is the only piece of the tool API that imports a database driver (pgx
// v5), so tools that are not transactional never pull it in.
//
//	func (t *orderTool) Call(ctx context.Context, req *tools.Request) (*tools.Response, error) {
//		tx, err := pgxtx.From(req)
//		if err != nil {
//			return nil, err
//		}
//		_, err = tx.Exec(ctx, `INSERT INTO orders (execution_id, sku) VALUES ($1, $2)`, req.ExecutionID, sku)
//		...
//	}
//
// The tool's writes become visible only if the gateway records the outcome
// in the same transaction, which it does only while the call still owns
// its idempotency record: a call whose lease was taken over leaves no
// trace, and a gateway that dies mid-call leaves neither the effect nor a
// replayable record, so the retry runs the tool again from a clean slate.
package pgxtx

import (
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/toolgateway/toolgateway/tools"
)

// Driver is the tools.Tx driver name of a pgx v5 transaction.
const Driver = "pgx/v5"

// Handle wraps a pgx transaction as a tools.Tx; the gateway builds it, a
// tool only reads it back with From.
type Handle struct{ tx pgx.Tx }

// Wrap returns tx as a tools.Tx.
func Wrap(tx pgx.Tx) *Handle { return &Handle{tx: tx} }

// Driver returns "pgx/v5".
func (h *Handle) Driver() string { return Driver }

// ErrNoTx: the request carries no pgx transaction (the tool is not declared
// transactional, or the gateway's store is not PostgreSQL).
var ErrNoTx = errors.New("pgxtx: the request carries no PostgreSQL transaction (is the tool Transactional, on the PostgreSQL store?)")

// From returns the transaction of a transactional call. The tool must not
// commit or roll it back.
func From(req *tools.Request) (pgx.Tx, error) {
	h, ok := req.Tx.(*Handle)
	if !ok || h == nil || h.tx == nil {
		return nil, ErrNoTx
	}
	return h.tx, nil
}
