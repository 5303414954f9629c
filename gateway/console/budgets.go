package console

import (
	"context"
	"net/http"
	"strings"
)

// BudgetCard is one budget window as the Budgets page shows it, amounts
// in the budget's unit (docs/budgets.md).
type BudgetCard struct {
	Budget, Tool, Requester string
	// WindowStart and ResetsAt are RFC 3339.
	WindowStart, ResetsAt        string
	Limit, Used, Held, Remaining float64
}

// BudgetsBackend is implemented by a Backend whose gateway keeps
// budgets; without it the Budgets page says there are none.
type BudgetsBackend interface {
	// Budgets reads the current window of each budget of tenant ("": the
	// gateway's tenant of calls without auth), of requester's for a
	// requester budget.
	Budgets(ctx context.Context, tenant, requester string) ([]BudgetCard, error)
}

// budgetsView is the Budgets page: the tenant asked for and a card per
// budget window.
type budgetsView struct {
	Tenant, Requester string
	Cards             []BudgetCard
}

// handleBudgets shows a card per budget window of the tenant in the
// query: used, held, remaining and when the window resets.
func (c *Console) handleBudgets(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	v := budgetsView{Tenant: strings.TrimSpace(q.Get("tenant")), Requester: strings.TrimSpace(q.Get("requester"))}
	if b, ok := c.backend.(BudgetsBackend); ok {
		cards, err := b.Budgets(r.Context(), v.Tenant, v.Requester)
		if err != nil {
			c.storeFailed(w, r, err)
			return
		}
		v.Cards = cards
	}
	c.pages.render(w, http.StatusOK, "budgets", pageFor(r, "Budgets", "budgets", v))
}
