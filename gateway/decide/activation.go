package decide

import (
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
)

// activation resolves a rule's variables for one call. It parses the
// arguments on the first read of `args` and keeps the value, so a call pays
// for the parse once however many rules read it, and not at all when none
// does. One activation serves one call's rules in turn, never two
// goroutines.
type activation struct {
	in     *Input
	tool   string
	args   ref.Val
	parsed bool
	// budget is `budget`, read on first use.
	budget     ref.Val
	budgetRead bool
}

// budgetValue is the CEL value of `budget`: the call's budgets by name,
// each {remaining, would_exceed}.
func budgetValue(read func() map[string]Budget) ref.Val {
	out := map[string]map[string]any{}
	if read != nil {
		for name, b := range read() {
			out[name] = map[string]any{"remaining": b.Remaining, "would_exceed": b.WouldExceed}
		}
	}
	return types.DefaultTypeAdapter.NativeToValue(out)
}

// ResolveName implements [interpreter.Activation].
func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case varArgs:
		if !a.parsed {
			a.args, a.parsed = argsValue(a.in.Arguments), true
		}
		return a.args, true
	case varTool:
		return types.String(a.tool), true
	case varTenant:
		return types.String(a.in.Tenant), true
	case varSession:
		return types.String(a.in.Session), true
	case varStep:
		if !a.in.HasStep {
			return types.Int(-1), true
		}
		return types.Int(a.in.Step), true
	case varAPI:
		return types.String(a.in.API), true
	case varBudget:
		if !a.budgetRead {
			a.budget, a.budgetRead = budgetValue(a.in.Budgets), true
		}
		return a.budget, true
	}
	return nil, false
}

// Parent implements [interpreter.Activation]; there is none.
func (a *activation) Parent() interpreter.Activation { return nil }
