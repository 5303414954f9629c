package decide

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"go.yaml.in/yaml/v3"

	"github.com/toolgateway/toolgateway/gateway/principal"
)

// Approvers names who may decide an [Approve] rule's approvals: either a
// CEL expression of type bool over the decider's `claims` (the verified
// token's claims, an empty map for a static token) and `principal` (the
// decider's principal id), e.g. `"finance" in claims.groups`, or a list of
// principal ids. In YAML and JSON it is a string (the expression) or a
// list of strings (the ids). The zero value lets anyone the approver kind
// admits decide.
type Approvers struct {
	// Expr is the CEL expression ("" when IDs is used).
	Expr string
	// IDs are the principal ids that may decide.
	IDs []string
}

// IsZero reports whether a names no approvers (omitempty).
func (a Approvers) IsZero() bool { return a.Expr == "" && len(a.IDs) == 0 }

// UnmarshalYAML reads a string (an expression) or a list of strings.
func (a *Approvers) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*a = Approvers{}
		return n.Decode(&a.Expr)
	case yaml.SequenceNode:
		*a = Approvers{}
		return n.Decode(&a.IDs)
	}
	return errors.New("approvers: want a CEL expression (a string) or a list of principal ids")
}

// MarshalJSON writes the expression, or the list of ids (the form the
// policy digest hashes).
func (a Approvers) MarshalJSON() ([]byte, error) {
	if a.Expr != "" {
		return json.Marshal(a.Expr)
	}
	return json.Marshal(a.IDs)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (a *Approvers) UnmarshalJSON(b []byte) error {
	*a = Approvers{}
	if err := json.Unmarshal(b, &a.Expr); err == nil {
		return nil
	}
	return json.Unmarshal(b, &a.IDs)
}

// MaxQuorum is the largest quorum a rule may ask: the principals who
// approved so far are kept with the approval.
const MaxQuorum = 16

// The names of the variables an approvers expression sees.
const (
	varClaims    = "claims"
	varPrincipal = "principal"
)

// Errors of [Policy.MayDecide]: the answers 403 not_an_approver and 403
// self_approval.
var (
	ErrNotAnApprover = errors.New("not an approver of this rule")
	ErrSelfApproval  = errors.New("the requester cannot decide their own call")
)

// Decider is who wants to decide an approval, as its door verified it.
type Decider struct {
	// ID is the decider's principal id.
	ID string
	// Person: a person signed in through an identity provider, not a
	// static token.
	Person bool
	// Claims are the person's verified token claims (nil for a token).
	Claims map[string]any
}

// approversEnv declares what an approvers expression may name.
func approversEnv() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable(varClaims, cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable(varPrincipal, cel.StringType),
		cel.CrossTypeNumericComparisons(true),
	)
}

// compileApprovers checks a rule's approvers and quorum: only on an
// [Approve] rule, an expression that compiles to bool, ids that are not
// empty, a quorum of 1 … MaxQuorum and at most the number of listed ids.
func compileApprovers(r Rule) (cel.Program, error) {
	if r.Decision != Approve && (!r.Approvers.IsZero() || r.Quorum != 0) {
		return nil, fmt.Errorf("approvers and quorum are only meaningful with decision %q", Approve)
	}
	if r.Quorum < 0 || r.Quorum > MaxQuorum {
		return nil, fmt.Errorf("quorum %d: want 1 … %d", r.Quorum, MaxQuorum)
	}
	if n := len(r.Approvers.IDs); n > 0 && r.Quorum > n {
		return nil, fmt.Errorf("quorum %d is larger than the %d approvers listed", r.Quorum, n)
	}
	for i, id := range r.Approvers.IDs {
		if id == "" || slices.Contains(r.Approvers.IDs[:i], id) {
			return nil, fmt.Errorf("approvers[%d]: empty or listed twice", i)
		}
	}
	if r.Approvers.Expr == "" {
		return nil, nil
	}
	env, err := approversEnv()
	if err != nil {
		return nil, fmt.Errorf("approvers: CEL environment: %w", err)
	}
	ast, issues := env.Compile(r.Approvers.Expr)
	if issues != nil && issues.Err() != nil {
		return nil, fmt.Errorf("approvers: %w", issues.Err())
	}
	if !ast.OutputType().IsExactType(cel.BoolType) {
		return nil, fmt.Errorf("approvers: type is %s, want bool (a claim is dyn: compare it, e.g. `claims.admin == true`)", ast.OutputType())
	}
	prg, err := env.Program(ast, cel.CostLimit(CostLimit), cel.InterruptCheckFrequency(interruptEvery))
	if err != nil {
		return nil, fmt.Errorf("approvers: %w", err)
	}
	return prg, nil
}

// Quorum is how many distinct principals must approve an approval of the
// rule at index rule (at least 1; 1 for an index p does not have).
func (p *Policy) Quorum(rule int) int {
	if p == nil || rule < 0 || rule >= len(p.rules) {
		return 1
	}
	return max(p.rules[rule].Quorum, 1)
}

// MayDecide says whether d may decide an approval that the rule at index
// rule asked for on behalf of requester (a principal id), approver being
// who the approval itself says decides it: nil, or [ErrSelfApproval]
// (an operator's approval and d is the requester, principal.Same) or
// [ErrNotAnApprover] (a caller's approval and d is no person; d not among
// the rule's approvers, or its expression false or failing for d; no
// principal). When p no longer has that rule as an [Approve] rule (a
// reload changed the rules: consuming the approval will find it stale),
// only the approval's own approver kind applies. Errors wrap these with
// the tool and rule for the log.
func (p *Policy) MayDecide(ctx context.Context, rule int, approver Approver, requester string, d Decider) error {
	var r *compiledRule
	if p != nil && rule >= 0 && rule < len(p.rules) && p.rules[rule].Decision == Approve {
		r = &p.rules[rule]
		approver = r.Approver
	}
	if d.ID == "" {
		return fmt.Errorf("tool %q: decide[%d]: %w: no principal", p.Tool(), rule, ErrNotAnApprover)
	}
	switch approver {
	case Caller:
		if !d.Person {
			return fmt.Errorf("tool %q: decide[%d]: %w: approver caller is decided by a person, not a static token", p.Tool(), rule, ErrNotAnApprover)
		}
	default:
		if principal.Same(d.ID, requester) {
			return fmt.Errorf("tool %q: decide[%d]: %w", p.Tool(), rule, ErrSelfApproval)
		}
	}
	if r == nil {
		return nil
	}
	if len(r.Approvers.IDs) > 0 && !slices.Contains(r.Approvers.IDs, d.ID) {
		return fmt.Errorf("tool %q: decide[%d]: %w: not listed", p.tool, rule, ErrNotAnApprover)
	}
	if r.approvers == nil {
		return nil
	}
	claims := d.Claims
	if claims == nil {
		claims = map[string]any{}
	}
	out, _, err := r.approvers.ContextEval(ctx, map[string]any{varClaims: claims, varPrincipal: d.ID})
	if err != nil {
		return fmt.Errorf("tool %q: decide[%d]: %w: approvers: %w", p.tool, rule, ErrNotAnApprover, err)
	}
	if ok, isBool := out.(types.Bool); !isBool || !bool(ok) {
		return fmt.Errorf("tool %q: decide[%d]: %w", p.tool, rule, ErrNotAnApprover)
	}
	return nil
}
