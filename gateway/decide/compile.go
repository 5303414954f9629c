package decide

import (
	"fmt"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/ext"
)

// CostLimit bounds the CEL cost of evaluating one rule for one call; a rule
// over it is an evaluation error, so the call is denied. CEL counts about
// one unit per operation and a few per element a comprehension walks (six
// for `args.items.all(i, i.qty < 10)`), so comparisons and string checks on
// ordinary arguments cost tens of units and a rule may still walk a list of
// about 1 500 elements. It is this low because cel-go (v0.31) tracks cost
// on a stack it searches per step, which makes a comprehension's evaluation
// time grow with the square of its length (measured: 500 elements 0.9 ms,
// 2 000 elements 9 ms, 4 000 elements 25 ms of CPU, against 0.2, 0.3 and
// 0.6 ms untracked); the limit caps that at a few milliseconds, about what
// parsing a maximal request body costs anyway.
const CostLimit = 10_000

// interruptEvery is how many comprehension iterations CEL runs between
// checks of the context, so a cancelled call stops a long rule early.
const interruptEvery = 100

// The names of the variables a rule sees, defined once.
const (
	varArgs    = "args"
	varTool    = "tool"
	varTenant  = "tenant"
	varSession = "session"
	varStep    = "step"
	varAPI     = "api"
	varBudget  = "budget"
)

// Policy is one tool's compiled decision rules; it is safe for concurrent
// use. The zero of *Policy (nil) has no rules: it allows every call.
type Policy struct {
	tool   string
	rules  []compiledRule
	digest string
}

// compiledRule is a normalized [Rule] with its program; program is nil for
// a rule without `when` (always true).
type compiledRule struct {
	Rule
	program cel.Program
	// approvers is the program of Rule.Approvers.Expr (nil: none).
	approvers cel.Program
}

// newEnv declares what a rule may name. It is built per [Compile] rather
// than shared, because compiling happens once per configuration load and a
// package-level environment would be global state.
func newEnv() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable(varArgs, cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable(varTool, cel.StringType),
		cel.Variable(varTenant, cel.StringType),
		cel.Variable(varSession, cel.StringType),
		cel.Variable(varStep, cel.IntType),
		cel.Variable(varAPI, cel.StringType),
		// budget["refunds-daily"].would_exceed: the budgets the call
		// charges (a name it does not charge is an error: the call is
		// denied).
		cel.Variable(varBudget, cel.MapType(cel.StringType, cel.MapType(cel.StringType, cel.DynType))),
		// JSON has one number type: `args.amount <= 1000` must hold for
		// 999.5 as well as for 999.
		cel.CrossTypeNumericComparisons(true),
		ext.Strings(),
	)
}

// Compile checks and compiles tool's rules. It refuses, with an error
// naming the tool, the rule's index and CEL's message: a `when` that does
// not compile or whose type is not bool, an unknown decision or approver,
// an approver on a rule that is not [Approve], and a rule after a rule
// without `when` (it could never decide). No rules gives a Policy that
// allows every call.
func Compile(tool string, rules []Rule) (*Policy, error) {
	p := &Policy{tool: tool, rules: make([]compiledRule, 0, len(rules))}
	if len(rules) == 0 {
		return p, nil
	}
	env, err := newEnv()
	if err != nil {
		return nil, fmt.Errorf("tool %q: decide: CEL environment: %w", tool, err)
	}
	for i, r := range rules {
		c, err := compileRule(env, r)
		if err != nil {
			return nil, fmt.Errorf("tool %q: decide[%d]: %w", tool, i, err)
		}
		if i > 0 && rules[i-1].When == "" {
			return nil, fmt.Errorf("tool %q: decide[%d]: unreachable: decide[%d] has no `when`, so it decides every call that gets to it", tool, i, i-1)
		}
		p.rules = append(p.rules, c)
	}
	if p.digest, err = digest(p.rules); err != nil {
		return nil, fmt.Errorf("tool %q: decide: %w", tool, err)
	}
	return p, nil
}

// compileRule normalizes r and compiles its `when`.
func compileRule(env *cel.Env, r Rule) (compiledRule, error) {
	r, err := r.normalized()
	if err != nil {
		return compiledRule{}, err
	}
	approvers, err := compileApprovers(r)
	if err != nil {
		return compiledRule{}, err
	}
	if r.When == "" {
		return compiledRule{Rule: r, approvers: approvers}, nil
	}
	ast, issues := env.Compile(r.When)
	if issues != nil && issues.Err() != nil {
		return compiledRule{}, fmt.Errorf("when: %w", issues.Err())
	}
	if !ast.OutputType().IsExactType(cel.BoolType) {
		return compiledRule{}, fmt.Errorf("when: type is %s, want bool (a value read from args is dyn: compare it, e.g. `args.flag == true`)", ast.OutputType())
	}
	prg, err := env.Program(ast,
		cel.CostLimit(CostLimit),
		cel.InterruptCheckFrequency(interruptEvery),
		cel.EvalOptions(cel.OptOptimize),
	)
	if err != nil {
		return compiledRule{}, fmt.Errorf("when: %w", err)
	}
	return compiledRule{Rule: r, program: prg, approvers: approvers}, nil
}

// Tool is the name of the tool p decides for.
func (p *Policy) Tool() string {
	if p == nil {
		return ""
	}
	return p.tool
}

// Rule returns the rule at index i as configured (normalized: the
// default approver filled in), e.g. for a person reading an approval
// that rule asked for; false when p has no rule i.
func (p *Policy) Rule(i int) (Rule, bool) {
	if p == nil || i < 0 || i >= len(p.rules) {
		return Rule{}, false
	}
	return p.rules[i].Rule, true
}

// Rules is how many rules p has; 0 means every call is allowed.
func (p *Policy) Rules() int {
	if p == nil {
		return 0
	}
	return len(p.rules)
}
