package decide

import (
	"context"
	"fmt"

	"github.com/google/cel-go/common/types"
)

// Input is what a decision is taken on: what the call path already has
// before the store decision.
type Input struct {
	// Arguments is the call's canonical (JCS) arguments, a JSON object. It
	// is parsed only if a rule reads `args`, and then once per call.
	Arguments []byte
	// Tenant and Session name the caller; Session is "" when the call
	// carries none. (Rules see the policy's own tool as `tool`.)
	Tenant, Session string
	// Step is the agent step, read only when HasStep; rules see -1 without.
	Step    uint64
	HasStep bool
	// API is "rest" or "mcp".
	API string
	// Budgets returns the budgets the call charges, by name, as rules see
	// them in `budget` (nil: none). It is called only if a rule reads
	// `budget`, and then once per call: it may read the store.
	Budgets func() map[string]Budget
}

// Budget is one budget the call charges, as a rule sees it in
// `budget["<name>"]`: what remains of its window (in the budget's unit)
// and whether this call's cost would take it over the limit. Both are
// read before the store decision, which checks again atomically.
type Budget struct {
	Remaining   float64
	WouldExceed bool
}

// Verdict is the decision for one call.
type Verdict struct {
	// Decision is what the rules decided.
	Decision Decision
	// Rule is the index of the deciding rule, -1 when no rule decided (no
	// rules: allow; none matched: deny).
	Rule int
	// Reason is the deciding rule's reason, or why no rule decided.
	Reason string
	// Approver is who approves, set for [Approve]; Quorum how many distinct
	// principals must (the rule's quorum: 0 means one).
	Approver Approver
	Quorum   int
	// Observe says the decision was taken in [ModeObserve]: it is reported
	// (metrics, receipts) but not enforced. Its zero value enforces.
	Observe bool
}

// Reasons for verdicts no configured rule's reason explains.
const (
	reasonNoMatch   = "no decide rule matched the call"
	reasonEvalError = "the decide rule could not be evaluated"
)

// Decide evaluates p's rules in order for in and returns the first match.
// A nil or empty p allows. An evaluation error returns a [Deny] verdict for
// the failing rule (fail closed) together with an error naming the tool and
// the rule's index, for the caller to log; the verdict is the answer either
// way.
func (p *Policy) Decide(ctx context.Context, in *Input) (Verdict, error) {
	if p == nil || len(p.rules) == 0 {
		return Verdict{Decision: Allow, Rule: -1}, nil
	}
	act := &activation{in: in, tool: p.tool}
	for i := range p.rules {
		r := &p.rules[i]
		if r.program != nil {
			out, _, err := r.program.ContextEval(ctx, act)
			if err != nil {
				return failClosed(i), fmt.Errorf("tool %q: decide[%d]: evaluate: %w", p.tool, i, err)
			}
			matched, ok := out.(types.Bool)
			if !ok {
				return failClosed(i), fmt.Errorf("tool %q: decide[%d]: evaluate: result is %s, want bool", p.tool, i, out.Type())
			}
			if !matched {
				continue
			}
		}
		return Verdict{Decision: r.Decision, Rule: i, Reason: r.Reason, Approver: r.Approver, Quorum: r.Quorum}, nil
	}
	return Verdict{Decision: Deny, Rule: -1, Reason: reasonNoMatch}, nil
}

// failClosed is the verdict for a rule that could not be evaluated.
func failClosed(rule int) Verdict {
	return Verdict{Decision: Deny, Rule: rule, Reason: reasonEvalError}
}
