package gateway

import (
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
	WindowStart string  `json:"window_start"`
	ResetsAt    string  `json:"resets_at"`
	Limit       float64 `json:"limit"`
	Used        float64 `json:"used"`
	Held        float64 `json:"held"`
	Remaining   float64 `json:"remaining"`
}

// handleAdminBudgets answers GET /admin/v1/budgets?tenant=T: the tenant's
// current window of every configured budget (docs/budgets.md).
func (s *Server) handleAdminBudgets(w http.ResponseWriter, r *http.Request) {
	tenant := r.URL.Query().Get("tenant")
	if tenant == "" {
		badAdminRequest(w, "tenant is required: budgets are kept per tenant")
		return
	}
	keeper, ok := s.opts.Store.(idempotency.BudgetKeeper)
	if !ok || !keeper.KeepsBudgets() {
		callpath.WriteProblem(w, callpath.NewProblem(wire.CodeAdminUnsupported, "this idempotency store does not keep budgets"))
		return
	}
	now := time.Now()
	out := []AdminBudget{}
	for _, c := range s.Budgets().Windows(tenant, now) {
		u, err := keeper.BudgetUsage(r.Context(), c.Bucket, c.Since, c.Rolling)
		if err != nil {
			s.Logger().ErrorContext(r.Context(), "admin: budget usage failed", "budget", c.Budget, "error", err)
			callpath.WriteProblem(w, callpath.NewProblem(wire.CodeStoreUnavailable, "the idempotency store is unreachable").WithRetryAfter(1))
			return
		}
		out = append(out, AdminBudget{Budget: c.Budget, Tenant: tenant, Tool: c.Tool,
			WindowStart: c.Since.UTC().Format(time.RFC3339), ResetsAt: c.ResetsAt.UTC().Format(time.RFC3339),
			Limit: budgets.Amount(c.Limit), Used: budgets.Amount(u.Reserved - u.Held), Held: budgets.Amount(u.Held),
			Remaining: budgets.Amount(c.Limit - u.Reserved)})
	}
	writeJSON(w, http.StatusOK, map[string]any{"budgets": out})
}
