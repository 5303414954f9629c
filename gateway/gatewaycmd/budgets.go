package gatewaycmd

import (
	"fmt"

	"github.com/toolgateway/toolgateway/gateway/budgets"
)

// buildBudgets compiles the budgets and the tools' charges (nil: no
// budgets configured, so no call pays for them).
func (c *Config) buildBudgets() (*budgets.Set, error) {
	charges := map[string][]budgets.Charge{}
	for _, t := range c.Tools {
		if len(t.Charges) > 0 {
			charges[t.Name] = t.Charges
		}
	}
	if len(c.Budgets) == 0 && len(charges) == 0 {
		return nil, nil
	}
	set, err := budgets.New(c.Budgets, charges)
	if err != nil {
		return nil, fmt.Errorf("budgets: %w", err)
	}
	return set, nil
}
