package callpath

import (
	"context"
	"errors"
	"time"

	"github.com/toolgateway/toolgateway/gateway/budgets"
	"github.com/toolgateway/toolgateway/gateway/decide"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/wire"
)

// budget is the budget stage: for a tool that charges budgets, the
// call's charges (each cost evaluated on the arguments, in the window of
// now), which the claim then reserves in the store's atomic step
// (docs/budgets.md). A tool that charges none passes by at the cost of
// one map lookup. A cost the arguments cannot give (missing, not a
// number, negative) refuses the call with invalid_arguments.
func (s *Engine) budget(ctx context.Context, st *callState) bool {
	set := s.settings.Load().budgets
	if st.unprotected != 0 || !set.Charges(st.call.Entry.Spec.Name) {
		return false
	}
	// The store as configured: s.store is its instrumented wrapper.
	if k, ok := s.opts.Store.(idempotency.BudgetKeeper); !ok || !k.KeepsBudgets() {
		return st.end(storeUnavailable("this idempotency store does not keep budgets; the tool was not run"))
	}
	charges, err := set.Evaluate(ctx, budgets.Call{Tool: st.call.Entry.Spec.Name, Tenant: st.call.Tenant, Requester: st.call.Requester.ID, Arguments: st.canonical, Now: time.Now()})
	if err != nil {
		if errors.Is(err, budgets.ErrCost) {
			return st.refuse(NewProblem(wire.CodeInvalidArguments, "the tool's budget cost cannot be computed from the arguments: "+err.Error()))
		}
		return st.end(problemResult(NewProblem(wire.CodeToolFailed, "the tool's budget cost failed: "+err.Error())))
	}
	st.charges, st.budgets = charges, s.budgetView(ctx, charges)
	s.metrics.budgets.remember(st.call.Tenant, st.call.Requester.ID)
	return false
}

// budgetView returns what a decide rule sees as `budget` for the call:
// each budget it charges, read from the store when a rule asks. A store
// that cannot be read gives no budgets, so a rule naming one fails and
// the call is denied. It holds the charges, not the call state, which a
// closure would move to the heap for every call.
func (s *Engine) budgetView(ctx context.Context, charges []idempotency.Charge) func() map[string]decide.Budget {
	return func() map[string]decide.Budget {
		keeper, _ := s.opts.Store.(idempotency.BudgetKeeper)
		out := make(map[string]decide.Budget, len(charges))
		for _, c := range charges {
			u, err := keeper.BudgetUsage(ctx, c.Bucket, c.Since, c.Rolling)
			if err != nil {
				s.log.ErrorContext(ctx, "budget usage for the decide rules failed", "budget", c.Budget, "error", err)
				return nil
			}
			left := c.Limit - u.Reserved
			out[c.Budget] = decide.Budget{Remaining: budgets.Amount(left), WouldExceed: c.Cost > left}
		}
		return out
	}
}
