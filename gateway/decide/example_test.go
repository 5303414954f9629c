package decide_test

import (
	"context"
	"fmt"

	"github.com/toolgateway/toolgateway/gateway/decide"
)

// Compile a tool's rules once, then decide each call.
func ExampleCompile() {
	policy, err := decide.Compile("refund", []decide.Rule{
		{When: "args.amount <= 1000", Decision: decide.Allow},
		{When: "args.amount <= 10000", Decision: decide.Approve, Reason: "refunds above 1 000 need finance"},
		{Decision: decide.Deny, Reason: "refunds above 10 000 are not an agent's call"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, args := range []string{`{"amount":250}`, `{"amount":2000}`, `{"amount":20000}`} {
		v, err := policy.Decide(context.Background(), &decide.Input{
			Arguments: []byte(args), Tenant: "acme",
			Session: "s-1", Step: 4, HasStep: true, API: "rest",
		})
		fmt.Println(args, v.Decision, v.Rule, v.Approver, v.Reason, err)
	}
	// Output:
	// {"amount":250} allow 0   <nil>
	// {"amount":2000} approve 1 operator refunds above 1 000 need finance <nil>
	// {"amount":20000} deny 2  refunds above 10 000 are not an agent's call <nil>
}

// A rule that does not compile is refused with the tool, its index and
// CEL's message.
func ExampleCompile_refused() {
	_, err := decide.Compile("refund", []decide.Rule{
		{When: "args.amount <= 1000", Decision: decide.Allow},
		{When: "amount <= 10000", Decision: decide.Approve},
	})
	fmt.Println(err)
	// Output:
	// tool "refund": decide[1]: when: ERROR: <input>:1:1: undeclared reference to 'amount' (in container '')
	//  | amount <= 10000
	//  | ^
}

// In observe mode a decision is reported but the call runs.
func ExampleMode_Apply() {
	policy, _ := decide.Compile("refund", []decide.Rule{{Decision: decide.Deny, Reason: "not yet"}})
	v, _ := policy.Decide(context.Background(), &decide.Input{Arguments: []byte(`{}`), API: "mcp"})
	v = decide.ModeObserve.Apply(v)
	fmt.Println(v.Decision, v.Enforced(), v.Effective())
	// Output: deny false allow
}
