package decide

import "fmt"

// Decision is what a rule decides for a call.
type Decision string

// The decisions a rule can take.
const (
	// Allow runs the call.
	Allow Decision = "allow"
	// Approve holds the call until a human approves it.
	Approve Decision = "approve"
	// Deny refuses the call; nothing runs.
	Deny Decision = "deny"
)

// Approver says who answers an [Approve] decision.
type Approver string

// The approvers an [Approve] rule can name.
const (
	// Operator approvals are answered by the gateway's operators (admin API,
	// console); they are the default.
	Operator Approver = "operator"
	// Caller approvals are answered by the caller's own human, in the
	// protocol (MCP elicitation, the SDK adapters' approval pause).
	Caller Approver = "caller"
)

// Rule is one entry of a tool's `decide` list, as configured.
type Rule struct {
	// When is a CEL expression of type bool; empty means always true.
	When string `yaml:"when,omitempty" json:"when,omitempty"`
	// Decision is [Allow], [Approve] or [Deny].
	Decision Decision `yaml:"decision" json:"decision"`
	// Reason is shown to the caller (deny) or the approver (approve).
	Reason string `yaml:"reason,omitempty" json:"reason,omitempty"`
	// Approver names who approves; only for [Approve], default [Operator].
	Approver Approver `yaml:"approver,omitempty" json:"approver,omitempty"`
	// Approvers narrows who may decide; only for [Approve] (approvers.go).
	Approvers Approvers `yaml:"approvers,omitempty" json:"approvers,omitzero"`
	// Quorum is how many distinct principals must approve (0: one); only
	// for [Approve].
	Quorum int `yaml:"quorum,omitempty" json:"quorum,omitempty"`
}

// normalized checks r's decision and approver and fills in the default
// approver, so that two spellings of one rule compile and hash alike.
func (r Rule) normalized() (Rule, error) {
	switch r.Decision {
	case Allow, Deny:
		if r.Approver != "" {
			// An approver on a rule that never asks anyone is a mistake
			// (probably the decision is wrong): refuse it rather than
			// ignore it.
			return r, fmt.Errorf("approver %q is only meaningful with decision %q", r.Approver, Approve)
		}
	case Approve:
		switch r.Approver {
		case "":
			r.Approver = Operator
		case Operator, Caller:
		default:
			return r, fmt.Errorf("unknown approver %q (want %q or %q)", r.Approver, Operator, Caller)
		}
	case "":
		return r, fmt.Errorf("decision missing (want %q, %q or %q)", Allow, Approve, Deny)
	default:
		return r, fmt.Errorf("unknown decision %q (want %q, %q or %q)", r.Decision, Allow, Approve, Deny)
	}
	return r, nil
}
