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
// (SettledReceipts), for what the store held for the record
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

// ReservationsToSettle reads the budget reservations of the record under
// scope before an operator settles it, for [Engine.ReceiptOfSettled]:
// none when receipts are off, the store keeps no budgets, or there is no
// record (the settlement answers that itself).
func (s *Engine) ReservationsToSettle(ctx context.Context, scope idempotency.Scope) ([]idempotency.Reservation, error) {
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

// ReceiptOfSettled enqueues the budget receipts of an operator's
// settlement of rec (SettledReceipts), after the receipt of the action.
func (s *Engine) ReceiptOfSettled(event receipts.Event, rec idempotency.Record, settled []idempotency.Reservation) {
	if s.receipts == nil {
		return
	}
	for _, r := range SettledReceipts(event, rec, settled) {
		s.receipts.enqueue(rec.Scope.Tenant, r)
	}
}
