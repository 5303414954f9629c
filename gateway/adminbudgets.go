package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/toolgateway/toolgateway/gateway/budgets"
	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/wire"
)

// AdminBudget is one budget window of GET /admin/v1/budgets, amounts in
// the budget's unit: used (committed: completed calls), held (calls whose
// outcome is open: in progress, UNKNOWN, or gone without a release) and
// remaining (limit − used − held; negative once approved calls went over).
type AdminBudget struct {
	Budget      string  `json:"budget"`
	Tenant      string  `json:"tenant"`
	Tool        string  `json:"tool,omitempty"`
	Requester   string  `json:"requester,omitempty"`
	WindowStart string  `json:"window_start"`
	ResetsAt    string  `json:"resets_at"`
	Limit       float64 `json:"limit"`
	Used        float64 `json:"used"`
	Held        float64 `json:"held"`
	Remaining   float64 `json:"remaining"`
}

// handleAdminBudgets answers GET /admin/v1/budgets?tenant=T[&requester=P]:
// the tenant's current window of every configured budget, P's window of a
// requester budget (docs/budgets.md).
func (s *Server) handleAdminBudgets(w http.ResponseWriter, r *http.Request) {
	tenant := r.URL.Query().Get("tenant")
	if tenant == "" {
		badAdminRequest(w, "tenant is required: budgets are kept per tenant")
		return
	}
	out, err := s.BudgetWindows(r.Context(), tenant, r.URL.Query().Get("requester"))
	switch {
	case errors.Is(err, errBudgetsUnkept):
		callpath.WriteProblem(w, callpath.NewProblem(wire.CodeAdminUnsupported, "this idempotency store does not keep budgets"))
	case err != nil:
		s.Logger().ErrorContext(r.Context(), "admin: budget usage failed", "error", err)
		callpath.WriteProblem(w, callpath.NewProblem(wire.CodeStoreUnavailable, "the idempotency store is unreachable").WithRetryAfter(1))
	default:
		writeJSON(w, http.StatusOK, map[string]any{"budgets": out})
	}
}

// errBudgetsUnkept: the store keeps no budgets.
var errBudgetsUnkept = errors.New("this idempotency store does not keep budgets")

// BudgetWindows reads the current window of each configured budget of
// tenant (of requester's for a requester budget) from the store: what the
// admin API and the console's Budgets page show.
func (s *Server) BudgetWindows(ctx context.Context, tenant, requester string) ([]AdminBudget, error) {
	keeper, ok := s.opts.Store.(idempotency.BudgetKeeper)
	if !ok || !keeper.KeepsBudgets() {
		return nil, errBudgetsUnkept
	}
	now := time.Now()
	out := []AdminBudget{}
	for _, c := range s.Budgets().Windows(tenant, requester, now) {
		u, err := keeper.BudgetUsage(ctx, c.Bucket, c.Since, c.Rolling)
		if err != nil {
			return nil, fmt.Errorf("budget %q: %w", c.Budget, err)
		}
		out = append(out, AdminBudget{Budget: c.Budget, Tenant: tenant, Tool: c.Tool, Requester: c.Requester,
			WindowStart: c.Since.UTC().Format(time.RFC3339), ResetsAt: c.ResetsAt.UTC().Format(time.RFC3339),
			Limit: budgets.Amount(c.Limit), Used: budgets.Amount(u.Reserved - u.Held), Held: budgets.Amount(u.Held),
			Remaining: budgets.Amount(c.Limit - u.Reserved)})
	}
	return out, nil
}
