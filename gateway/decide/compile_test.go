package decide_test

import (
	"strings"
	"testing"

	"github.com/toolgateway/toolgateway/gateway/decide"
)

// TestCompileRefuses checks every refusal names the tool, the rule's index
// and what is wrong (for a CEL error, CEL's own message).
func TestCompileRefuses(t *testing.T) {
	allow := decide.Rule{When: "args.amount <= 1000", Decision: decide.Allow}
	cases := []struct {
		name  string
		rules []decide.Rule
		want  []string // substrings of the error, in order
	}{
		{"syntax error", []decide.Rule{allow, {When: "args.amount <=", Decision: decide.Deny}},
			[]string{`tool "refund": decide[1]: when: ERROR: <input>:1:`, "Syntax error"}},
		{"undeclared name", []decide.Rule{{When: "amount <= 1000", Decision: decide.Allow}},
			[]string{`tool "refund": decide[0]: when: ERROR: <input>:1:1: undeclared reference to 'amount'`}},
		{"not bool", []decide.Rule{{When: "step + 1", Decision: decide.Allow}},
			[]string{`tool "refund": decide[0]: when: type is int, want bool`}},
		{"dyn is not bool", []decide.Rule{{When: "args.urgent", Decision: decide.Allow}},
			[]string{`tool "refund": decide[0]: when: type is dyn, want bool`, "`args.flag == true`"}},
		{"wrong operand types", []decide.Rule{{When: `tenant > 3`, Decision: decide.Allow}},
			[]string{`tool "refund": decide[0]: when: ERROR:`, "found no matching overload for '_>_'"}},
		{"unknown decision", []decide.Rule{allow, allow, {Decision: "maybe"}},
			[]string{`tool "refund": decide[2]: unknown decision "maybe" (want "allow", "approve" or "deny")`}},
		{"missing decision", []decide.Rule{{When: "true"}},
			[]string{`tool "refund": decide[0]: decision missing (want "allow", "approve" or "deny")`}},
		{"unknown approver", []decide.Rule{{Decision: decide.Approve, Approver: "finance"}},
			[]string{`tool "refund": decide[0]: unknown approver "finance" (want "operator" or "caller")`}},
		{"approver on allow", []decide.Rule{{When: "true", Decision: decide.Allow, Approver: decide.Caller}},
			[]string{`tool "refund": decide[0]: approver "caller" is only meaningful with decision "approve"`}},
		{"approver on deny", []decide.Rule{{Decision: decide.Deny, Approver: decide.Operator}},
			[]string{`tool "refund": decide[0]: approver "operator" is only meaningful with decision "approve"`}},
		{"rule after a catch-all", []decide.Rule{allow, {Decision: decide.Deny}, {When: "true", Decision: decide.Allow}},
			[]string{`tool "refund": decide[2]: unreachable: decide[1] has no ` + "`when`"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := decide.Compile("refund", tc.rules)
			if err == nil {
				t.Fatalf("Compile accepted %+v (policy %v)", tc.rules, p)
			}
			rest := err.Error()
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("error %q lacks %q", err, w)
				}
				rest = rest[i+len(w):]
			}
		})
	}
}

// TestCompileAccepts checks what a valid rule list compiles to.
func TestCompileAccepts(t *testing.T) {
	p, err := decide.Compile("refund", []decide.Rule{
		{When: `args.amount <= 1000 && tenant != "" && session.size() > 0 && step >= 0 && api in ["rest", "mcp"] && tool == "refund"`, Decision: decide.Allow},
		{When: `has(args.note) && args.note.lowerAscii().contains("urgent")`, Decision: decide.Approve, Approver: decide.Caller},
		{Decision: decide.Deny},
	})
	if err != nil {
		t.Fatal(err)
	}
	if p.Tool() != "refund" || p.Rules() != 3 {
		t.Errorf("Tool, Rules = %q, %d; want refund, 3", p.Tool(), p.Rules())
	}
	none, err := decide.Compile("lookup", nil)
	if err != nil || none.Rules() != 0 || none.Digest() != "" {
		t.Errorf("Compile(no rules) = %d rules, digest %q, %v; want 0, empty, nil", none.Rules(), none.Digest(), err)
	}
	var nilPolicy *decide.Policy
	if nilPolicy.Tool() != "" || nilPolicy.Rules() != 0 || nilPolicy.Digest() != "" {
		t.Error("a nil Policy should have no tool, rules or digest")
	}
}
