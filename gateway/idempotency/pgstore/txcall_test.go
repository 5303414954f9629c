package pgstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/tools/pgxtx"
)

// orderTool is a transactional tool that writes one business row per run.
func orderTool(ctx context.Context, s *Store, req *tools.Request) error {
	tx, err := pgxtx.From(req)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, qualifier(s.schema)(`INSERT INTO @.orders (execution_id) VALUES ($1)`), req.ExecutionID)
	return err
}

// orders lists the committed business rows, as another session sees them.
func orders(t *testing.T, s *Store, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), qualifier(s.schema)(`SELECT execution_id FROM @.orders ORDER BY execution_id`))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

func newTxTestStore(t *testing.T) (*Store, *pgxpool.Pool) {
	s, pool := newTestStore(t, Options{})
	if _, err := pool.Exec(t.Context(), qualifier(s.schema)(`CREATE TABLE @.orders (execution_id text PRIMARY KEY)`)); err != nil {
		t.Fatal(err)
	}
	return s, pool
}

// runCall claims req, runs orderTool in a Call and returns it uncommitted.
func runCall(t *testing.T, s *Store, req idempotency.ClaimRequest) (idempotency.TxCall, idempotency.Lease) {
	t.Helper()
	d, err := s.Claim(t.Context(), req)
	if err != nil || d.Outcome != idempotency.OutcomeClaimed {
		t.Fatalf("claim: %v %v", d.Outcome, err)
	}
	call, err := s.BeginCall(t.Context(), d.Lease)
	if err != nil {
		t.Fatal(err)
	}
	if err := orderTool(t.Context(), s, &tools.Request{ExecutionID: d.ExecutionID, Tx: call.Tx()}); err != nil {
		t.Fatal(err)
	}
	return call, d.Lease
}

// TestTransactionalCommitsBoth: the tool's row and the COMPLETED record
// appear together, at the commit; a retry replays and writes nothing.
func TestTransactionalCommitsBoth(t *testing.T) {
	s, pool := newTxTestStore(t)
	req := request("order-1", &idempotency.Step{SessionID: "s", Index: 1})
	call, _ := runCall(t, s, req)
	if got := orders(t, s, pool); len(got) != 0 {
		t.Fatalf("the tool's write is visible before the commit: %v", got)
	}
	if err := call.Complete(t.Context(), okResponse, time.Hour); err != nil {
		t.Fatal(err)
	}
	if got := orders(t, s, pool); len(got) != 1 || got[0] != req.ExecutionID {
		t.Fatalf("orders after the commit: %v", got)
	}
	retry := req
	retry.Owner, retry.ExecutionID = "other", "exec-other"
	if d, err := s.Claim(t.Context(), retry); err != nil || d.Outcome != idempotency.OutcomeReplay || d.ExecutionID != req.ExecutionID {
		t.Fatalf("retry: %+v %v", d, err)
	}
	if err := call.Rollback(t.Context()); err != nil {
		t.Fatalf("Rollback after Complete: %v", err)
	}
}

// TestTransactionalLostLeaseRollsBack: a call whose lease was taken over
// while its tool ran gets ErrLeaseLost from Complete, and its write is
// gone; only the new owner's run counts.
func TestTransactionalLostLeaseRollsBack(t *testing.T) {
	s, pool := newTxTestStore(t)
	req := request("order-2", nil)
	req.LockTTL = 100 * time.Millisecond
	slow, _ := runCall(t, s, req)
	time.Sleep(300 * time.Millisecond) // the lease runs out; no renewal

	next := req
	next.Owner, next.ExecutionID, next.LockTTL = "owner-2", "exec-2", time.Minute
	call, _ := runCall(t, s, next)
	if err := call.Complete(t.Context(), okResponse, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := slow.Complete(t.Context(), okResponse, time.Hour); !errors.Is(err, idempotency.ErrLeaseLost) {
		t.Fatalf("Complete of the taken-over call = %v, want ErrLeaseLost", err)
	}
	if got := orders(t, s, pool); len(got) != 1 || got[0] != "exec-2" {
		t.Fatalf("orders: %v, want only the new owner's", got)
	}
	if rec, err := s.Get(t.Context(), req.Scope); err != nil || rec.State != idempotency.StateCompleted || rec.ExecutionID != "exec-2" {
		t.Fatalf("record: %+v %v", rec, err)
	}
}

// TestTransactionalCrashLeavesNothing: a gateway that dies before the
// commit (its connection drops) leaves neither the write nor a
// completion; the record is taken over (transactional calls are claimed
// with the rerun policy) and the rerun's effect is the only one.
func TestTransactionalCrashLeavesNothing(t *testing.T) {
	s, pool := newTxTestStore(t)
	req := request("order-3", nil)
	req.LockTTL = 100 * time.Millisecond
	dead, _ := runCall(t, s, req)
	// The gateway process dies: its connection closes mid-transaction.
	if err := dead.(*Call).tx.Conn().Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Hands the broken connection back to the pool (which discards it);
	// a dead process would simply have lost it.
	_ = dead.Rollback(context.Background())
	if got := orders(t, s, pool); len(got) != 0 {
		t.Fatalf("orders after the crash: %v", got)
	}
	time.Sleep(300 * time.Millisecond)
	retry := req
	retry.Owner, retry.ExecutionID, retry.LockTTL = "owner-3", "exec-3", time.Minute
	d, err := s.Claim(t.Context(), retry)
	if err != nil || d.Outcome != idempotency.OutcomeClaimed || !d.TakenOver {
		t.Fatalf("retry after the crash: %+v %v", d, err)
	}
	call, err := s.BeginCall(t.Context(), d.Lease)
	if err != nil {
		t.Fatal(err)
	}
	if err := orderTool(t.Context(), s, &tools.Request{ExecutionID: d.ExecutionID, Tx: call.Tx()}); err != nil {
		t.Fatal(err)
	}
	if err := call.Complete(t.Context(), okResponse, time.Hour); err != nil {
		t.Fatal(err)
	}
	if got := orders(t, s, pool); len(got) != 1 || got[0] != "exec-3" {
		t.Fatalf("orders: %v, want exactly the rerun's", got)
	}
}

// TestTransactionalRollback: a failed tool's writes are undone, and the
// record is released as for any failed call.
func TestTransactionalRollback(t *testing.T) {
	s, pool := newTxTestStore(t)
	call, lease := runCall(t, s, request("order-4", nil))
	if err := call.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(t.Context(), lease); err != nil {
		t.Fatal(err)
	}
	if got := orders(t, s, pool); len(got) != 0 {
		t.Fatalf("orders after rollback: %v", got)
	}
	if _, err := pgxtx.From(&tools.Request{}); !errors.Is(err, pgxtx.ErrNoTx) {
		t.Fatalf("From without a transaction = %v", err)
	}
}

// TestTransactionalCompletionMarksTheReceiptPending: with the receipt
// outbox on, a transactional call's commit carries its outbox entry; a
// call rolled back (its lease lost) leaves none.
func TestTransactionalCompletionMarksTheReceiptPending(t *testing.T) {
	s, pool := newTestStore(t, Options{ReceiptOutbox: true})
	if _, err := pool.Exec(t.Context(), qualifier(s.schema)(`CREATE TABLE @.orders (execution_id text PRIMARY KEY)`)); err != nil {
		t.Fatal(err)
	}
	req := request("order-outbox", &idempotency.Step{SessionID: "s", Index: 4})
	call, lease := runCall(t, s, req)
	if err := call.Complete(t.Context(), okResponse, time.Hour); err != nil {
		t.Fatal(err)
	}
	lost := request("order-outbox-lost", nil)
	lostCall, lostLease := runCall(t, s, lost)
	stale := lostLease
	stale.FencingToken++
	staleCall, err := s.BeginCall(t.Context(), stale)
	if err != nil {
		t.Fatal(err)
	}
	if err := staleCall.Complete(t.Context(), okResponse, time.Hour); !errors.Is(err, idempotency.ErrLeaseLost) {
		t.Fatalf("Complete under another fencing token = %v, want ErrLeaseLost", err)
	}
	_ = lostCall.Rollback(t.Context())
	pending, err := s.PendingReceipts(t.Context(), time.Now().Add(time.Minute), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 1 || pending[0].ExecutionID != lease.ExecutionID || pending[0].Status != okResponse.Status ||
		pending[0].Scope != lease.Scope || pending[0].Step == nil || pending[0].Step.Index != 4 {
		t.Fatalf("pending receipts %+v, want the committed call's only", pending)
	}
}
