package budgets_test

import (
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/budgets"
)

// BenchmarkEvaluate is what a budget adds to a call before the store:
// the charge's CEL cost over the call's arguments and its window and
// bucket (the reservation itself is in the store's claim step: the
// stores' BenchmarkClaimBudget).
func BenchmarkEvaluate(b *testing.B) {
	for _, bc := range []struct{ name, cost string }{{"constant", "1"}, {"argument", "args.amount"}} {
		b.Run(bc.name, func(b *testing.B) {
			set, err := budgets.New([]budgets.Budget{daily("spend")}, map[string][]budgets.Charge{"refund": {{Budget: "spend", Cost: bc.cost}}})
			if err != nil {
				b.Fatal(err)
			}
			call := budgets.Call{Tool: "refund", Tenant: "acme", Arguments: []byte(`{"amount":2500,"currency":"EUR","order":"o-1234"}`), Now: time.Now()}
			b.ReportAllocs()
			for b.Loop() {
				if charges, err := set.Evaluate(b.Context(), call); err != nil || len(charges) != 1 {
					b.Fatalf("%d charges, %v", len(charges), err)
				}
			}
		})
	}
}
