package callpath

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/toolgateway/toolgateway/gateway/budgets"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/receipts"
)

// The budget receipts (docs/budgets.md): budget_reserved when a claim
// reserved a call's charges, budget_committed when its record completed,
// budget_released when the call path released it (it provably did not
// act); one receipt per budget charged, naming the budget and the
// amount. A held amount (UNKNOWN) has its made_unknown receipt; when an
// operator's resolve or reconciliation's "committed" settles it, its
// budget_committed follows their resolved receipt, and an operator's
// delete or reconciliation's "not committed" leaves budget_released
// (Settle, SettledReceipts), for what the store held for the record
// (idempotency.BudgetKeeper.Reservations, read before the settlement).

// budgetReserved carries the call's charges on its lease, so its
// settlement is receipted too, and enqueues budget_reserved for a claim
// that charged: not for a takeover, whose record's first claim reserved.
func (s *Engine) budgetReserved(st *callState, takenOver bool) {
	if len(st.charges) == 0 {
		return
	}
	st.lease.Charges = st.charges
	if !takenOver {
		s.budgetSettled(st.lease, receipts.EventBudgetReserved)
	}
}

// budgetSettled enqueues event for each of lease's charges (receipts on).
func (s *Engine) budgetSettled(lease idempotency.Lease, event receipts.Event) {
	if s.receipts == nil {
		return
	}
	for _, c := range lease.Charges {
		s.receipts.enqueue(lease.Scope.Tenant, budgetReceipt(event, lease.Scope, lease.Step, lease.ExecutionID, c.Budget, c.Cost))
	}
}

// budgetReceipt is the receipt of event for cost (millionths) of budget,
// charged by the record under scope (its step and execution id).
func budgetReceipt(event receipts.Event, scope idempotency.Scope, step *idempotency.Step, executionID, budget string, cost int64) receipts.Receipt {
	r := receipts.Receipt{Event: event, Tool: scope.Tool, Key: receipts.KeyHash(scope.Key),
		ExecutionID: executionID, Budget: budget, Amount: strconv.FormatFloat(budgets.Amount(cost), 'f', -1, 64)}
	if step != nil {
		r.Session, r.Step = step.SessionID, strconv.FormatUint(step.Index, 10)
	}
	return r
}

// SettledReceipts are the budget receipts of a settlement by an operator
// or by reconciliation: event ([receipts.EventBudgetCommitted] for a
// resolve, [receipts.EventBudgetReleased] for a delete or a drop) for
// each of the reservations rec held, read before it was settled.
func SettledReceipts(event receipts.Event, rec idempotency.Record, settled []idempotency.Reservation) []receipts.Receipt {
	out := make([]receipts.Receipt, len(settled))
	for i, r := range settled {
		out[i] = budgetReceipt(event, rec.Scope, rec.Step, rec.ExecutionID, r.Budget, r.Cost)
	}
	return out
}

// Settle runs an operator's settlement of the record under scope: do, a
// resolve (event [receipts.EventResolved]) or a delete
// ([receipts.EventDeleted]), answering the record as it was settled (a
// deleted one as it was read before). It then enqueues the settlement's
// receipt, by by (claimedBy: the name typed beside the admin token), and
// the budget receipts of what the record held: committed by a resolve,
// released by a delete. What it held is read before do, while the
// record's life cannot change its charges; with receipts off nothing is
// read or enqueued.
func (s *Engine) Settle(ctx context.Context, scope idempotency.Scope, event receipts.Event, by, claimedBy string,
	do func() (idempotency.Record, error)) (idempotency.Record, error) {
	settled, err := s.reservationsToSettle(ctx, scope)
	if err != nil {
		return idempotency.Record{}, err
	}
	rec, err := do()
	if err != nil || s.receipts == nil {
		return rec, err
	}
	s.receiptForRecord(event, rec, by, claimedBy)
	budgetEvent := receipts.EventBudgetCommitted
	if event == receipts.EventDeleted {
		budgetEvent = receipts.EventBudgetReleased
	}
	for _, r := range SettledReceipts(budgetEvent, rec, settled) {
		s.receipts.enqueue(rec.Scope.Tenant, r)
	}
	return rec, nil
}

// reservationsToSettle reads the budget reservations of the record under
// scope before an operator settles it: none when receipts are off, the
// store keeps no budgets, or there is no record (the settlement answers
// that itself).
func (s *Engine) reservationsToSettle(ctx context.Context, scope idempotency.Scope) ([]idempotency.Reservation, error) {
	keeper, ok := s.opts.Store.(idempotency.BudgetKeeper)
	if s.receipts == nil || !ok || !keeper.KeepsBudgets() {
		return nil, nil
	}
	settled, err := keeper.Reservations(ctx, scope)
	if errors.Is(err, idempotency.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the record's budget reservations: %w", err)
	}
	return settled, nil
}
