package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/tools/pgxtx"
)

// Call is one execution of a transactional tool: a transaction on the
// store's database that the tool writes in, and that records the call's
// outcome before it commits. The claim itself was committed before (other
// gateways must see the call IN_PROGRESS while it runs); only the tool's
// writes and the completion share the transaction.
//
// Outcomes, whatever the tool's lease_expiry policy:
//   - Complete commits the tool's writes and the COMPLETED record together,
//     after the fencing check (owner and token) inside the transaction;
//   - a lost lease (the check finds another owner) rolls everything back
//     and returns ErrLeaseLost: the new owner's run is the only one;
//   - a crash of the gateway or of the database before the commit leaves
//     neither the writes nor a completion: the IN_PROGRESS record is taken
//     over and the tool runs again from a clean slate, so the gateway
//     should claim transactional calls with LeaseExpiryRerun;
//   - Rollback (the tool failed) undoes the writes; the caller then
//     releases the record as for any failed call.
//
// The completion UPDATE locks the record only at the end, so renewals on
// other connections are not blocked while the tool runs; a takeover racing
// with the commit waits for it and then replays.
type Call struct {
	store *Store
	lease idempotency.Lease
	tx    pgx.Tx
}

// BeginCall starts the transaction of a transactional call that holds lease
// (idempotency.TxStore); the TxCall it returns is a *Call.
func (s *Store) BeginCall(ctx context.Context, lease idempotency.Lease) (idempotency.TxCall, error) {
	if err := s.ready(ctx); err != nil {
		return nil, fmt.Errorf("pgstore: begin call %s: %w", lease.Scope, err)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgstore: begin call %s: %w", lease.Scope, err)
	}
	return &Call{store: s, lease: lease, tx: tx}, nil
}

// Tx returns the transaction, for the tool (tools.Request.Tx).
func (c *Call) Tx() tools.Tx { return pgxtx.Wrap(c.tx) }

// Complete records resp as the call's outcome in the transaction, if the
// call still owns its record, and commits the tool's writes with it. If
// the lease is lost, it rolls everything back and returns ErrLeaseLost. Any
// other error means the commit did not happen (or its result is unknown if
// the connection broke during COMMIT; the record then shows which: a
// COMPLETED record with this call's execution id, or an IN_PROGRESS one to
// be taken over).
func (c *Call) Complete(ctx context.Context, resp idempotency.StoredResponse, ttl time.Duration) error {
	if ttl <= 0 {
		_ = c.tx.Rollback(ctx)
		return fmt.Errorf("pgstore: complete %s: ttl %v must be positive", c.lease.Scope, ttl)
	}
	stmt, args := c.store.completion(c.lease, resp, ttl)
	tag, err := c.tx.Exec(ctx, stmt, args...)
	if err == nil && tag.RowsAffected() != 1 {
		err = idempotency.ErrLeaseLost
	}
	if err != nil {
		_ = c.tx.Rollback(context.WithoutCancel(ctx))
		if errors.Is(err, idempotency.ErrLeaseLost) {
			return err
		}
		return fmt.Errorf("pgstore: complete %s in the tool's transaction: %w", c.lease.Scope, err)
	}
	if err := c.tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgstore: commit %s: %w", c.lease.Scope, err)
	}
	return nil
}

// Rollback undoes the tool's writes (the tool failed, or its outcome is
// not to be recorded). It is safe after Complete.
func (c *Call) Rollback(ctx context.Context) error {
	if err := c.tx.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		return fmt.Errorf("pgstore: roll back %s: %w", c.lease.Scope, err)
	}
	return nil
}
