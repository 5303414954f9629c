package callpath

import (
	"strconv"

	"github.com/toolgateway/toolgateway/gateway/budgets"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/receipts"
)

// The budget receipts (docs/budgets.md): budget_reserved when a claim
// reserved a call's charges, budget_committed when its record completed,
// budget_released when the call path released it (it provably did not
// act); one receipt per budget charged, naming the budget and the
// amount. A held amount (UNKNOWN) has its made_unknown receipt; the
// operator's resolve or delete and reconciliation have theirs (resolved,
// deleted).

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
		r := receipts.Receipt{Event: event, Tool: lease.Scope.Tool, Key: receipts.KeyHash(lease.Scope.Key),
			ExecutionID: lease.ExecutionID, Budget: c.Budget, Amount: strconv.FormatFloat(budgets.Amount(c.Cost), 'f', -1, 64)}
		if lease.Step != nil {
			r.Session, r.Step = lease.Step.SessionID, strconv.FormatUint(lease.Step.Index, 10)
		}
		s.receipts.enqueue(lease.Scope.Tenant, r)
	}
}
