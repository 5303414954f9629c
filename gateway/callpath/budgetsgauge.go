package callpath

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgateway/toolgateway/gateway/budgets"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// The budget gauges, gateway_budget_used{budget}, gateway_budget_held
// and gateway_budget_remaining: each budget's current windows, sampled
// from the store with the records gauge. A budget is kept per scope
// (tenant, tool, principal), the label names only the budget: used and
// held are summed over the scopes sampled, remaining is the least any of
// them has left (the scope nearest its limit, what an alert wants).
//
// The store cannot list its buckets cheaply, so the scopes sampled are
// those this replica's budget stage charged since it started (at most
// maxBudgetScopes) and the tenants of the UNKNOWN records of one listing
// page: a budget held by an UNKNOWN call shows also on a replica that
// has not charged it since a restart.

// maxBudgetScopes bounds the scopes a replica remembers for the gauges.
const maxBudgetScopes = 1000

// budgetScope is whose windows a sample reads.
type budgetScope struct{ tenant, requester string }

// budgetGauges are the budget gauges and the scopes they sample.
type budgetGauges struct {
	used, held, remaining *prometheus.GaugeVec

	mu     sync.Mutex
	scopes map[budgetScope]struct{}
	// published are the budgets of the last sample (only the sampler
	// writes the gauges, one sample at a time).
	published map[string]bool
}

func newBudgetGauges() *budgetGauges {
	vec := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, []string{"budget"})
	}
	return &budgetGauges{
		used:      vec("gateway_budget_used", "What completed calls committed in the budget's current windows, summed over its scopes, in the budget's unit."),
		held:      vec("gateway_budget_held", "What calls whose outcome is open (in progress, UNKNOWN) hold in the budget's current windows, summed over its scopes."),
		remaining: vec("gateway_budget_remaining", "The least any scope of the budget has left in its current window (limit - used - held; negative once approved calls went over)."),
		scopes:    map[budgetScope]struct{}{},
		published: map[string]bool{},
	}
}

func (g *budgetGauges) collectors() []prometheus.Collector {
	return []prometheus.Collector{g.used, g.held, g.remaining}
}

// remember adds a scope the budget stage charged.
func (g *budgetGauges) remember(tenant, requester string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.scopes) < maxBudgetScopes {
		g.scopes[budgetScope{tenant, requester}] = struct{}{}
	}
}

func (g *budgetGauges) sampledScopes() []budgetScope {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]budgetScope, 0, len(g.scopes))
	for sc := range g.scopes {
		out = append(out, sc)
	}
	return out
}

// budgetSample is one budget's figures, in store units.
type budgetSample struct {
	used, held, remaining int64
}

// sampleBudgets reads the current windows of every scope sampled and
// publishes the gauges; a store that fails keeps the last values.
func (s *Engine) sampleBudgets(ctx context.Context) {
	set := s.settings.Load().budgets
	keeper, ok := s.opts.Store.(idempotency.BudgetKeeper)
	if set == nil || !ok || !keeper.KeepsBudgets() {
		return
	}
	g := s.metrics.budgets
	scopes := g.sampledScopes()
	if s.admin != nil {
		page, err := s.admin.List(ctx, idempotency.ListFilter{State: idempotency.StateUnknown, Limit: idempotency.MaxListLimit})
		if err == nil {
			for _, rec := range page.Records {
				scopes = append(scopes, budgetScope{tenant: rec.Scope.Tenant})
			}
		}
	}
	now := time.Now()
	samples := map[string]*budgetSample{}
	for _, name := range set.Names() {
		samples[name] = &budgetSample{remaining: set.Limit(name)}
	}
	read := map[string]bool{}
	for _, sc := range scopes {
		for _, c := range set.Windows(sc.tenant, sc.requester, now) {
			if read[c.Bucket] {
				continue
			}
			read[c.Bucket] = true
			u, err := keeper.BudgetUsage(ctx, c.Bucket, c.Since, c.Rolling)
			if err != nil {
				if ctx.Err() == nil {
					s.metrics.storeErrors.WithLabelValues("budgets_sample").Inc()
					s.log.WarnContext(ctx, "budget gauges: the store did not answer; the gauges keep their last values", "budget", c.Budget, "error", err)
				}
				return
			}
			b := samples[c.Budget]
			b.used += u.Reserved - u.Held
			b.held += u.Held
			b.remaining = min(b.remaining, c.Limit-u.Reserved)
		}
	}
	for name, b := range samples {
		g.used.WithLabelValues(name).Set(budgets.Amount(b.used))
		g.held.WithLabelValues(name).Set(budgets.Amount(b.held))
		g.remaining.WithLabelValues(name).Set(budgets.Amount(b.remaining))
	}
	for name := range g.published {
		if samples[name] == nil { // removed by a reload
			g.used.DeleteLabelValues(name)
			g.held.DeleteLabelValues(name)
			g.remaining.DeleteLabelValues(name)
		}
	}
	g.published = make(map[string]bool, len(samples))
	for name := range samples {
		g.published[name] = true
	}
}
