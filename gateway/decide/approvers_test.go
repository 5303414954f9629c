package decide_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/toolgateway/toolgateway/gateway/decide"
)

func TestApproversDecideWhoMayDecide(t *testing.T) {
	var rules []decide.Rule
	const src = `
- when: args.amount > 1000
  decision: approve
  approvers: '"finance" in claims.groups'
  quorum: 2
- when: args.amount > 100
  decision: approve
  approvers: [oidc:idp.example:ada, oidc:idp.example:bob]
- when: args.amount > 10
  decision: approve
  approver: caller
- decision: approve
`
	if err := yaml.Unmarshal([]byte(src), &rules); err != nil {
		t.Fatal(err)
	}
	p, err := decide.Compile("refund", rules)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	finance := decide.Decider{ID: "oidc:idp.example:ada", Person: true, Claims: map[string]any{"groups": []any{"finance"}}}
	sales := decide.Decider{ID: "oidc:idp.example:eve", Person: true, Claims: map[string]any{"groups": []any{"sales"}}}
	admin := decide.Decider{ID: "token:admin"}
	agent := decide.Decider{ID: "token:acme"}
	cases := []struct {
		rule      int
		requester string
		d         decide.Decider
		want      error
	}{
		{0, "token:acme", finance, nil},
		{0, "token:acme", sales, decide.ErrNotAnApprover},
		{0, "token:acme", admin, decide.ErrNotAnApprover}, // no claims: the expression fails
		{0, finance.ID, finance, decide.ErrSelfApproval},
		{1, "token:acme", finance, nil},
		{1, "token:acme", sales, decide.ErrNotAnApprover},
		{2, "token:acme", agent, decide.ErrNotAnApprover},
		{2, "host-user:idp.example:ada", decide.Decider{ID: "host-user:idp.example:ada", Person: true}, nil},
		{3, "token:acme", admin, nil},
		{3, "token:admin", admin, decide.ErrSelfApproval},
		{3, "token:acme", decide.Decider{}, decide.ErrNotAnApprover},
		{7, "token:acme", admin, nil}, // a rule gone: the approval's own kind (operator) applies
		{7, "token:admin", admin, decide.ErrSelfApproval},
	}
	for i, c := range cases {
		if err := p.MayDecide(ctx, c.rule, decide.Operator, c.requester, c.d); !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("case %d: MayDecide(decide[%d], %s by %s) = %v, want %v", i, c.rule, c.requester, c.d.ID, err, c.want)
		}
	}
	if p.Quorum(0) != 2 || p.Quorum(1) != 1 {
		t.Errorf("quorums %d, %d; want 2, 1", p.Quorum(0), p.Quorum(1))
	}
	v, _ := p.Decide(ctx, &decide.Input{Arguments: []byte(`{"amount":5000}`)})
	if v.Quorum != 2 {
		t.Errorf("verdict quorum %d, want 2", v.Quorum)
	}
}

func TestApproversRefusedAtLoad(t *testing.T) {
	for name, r := range map[string]decide.Rule{
		"expression does not compile": {Decision: decide.Approve, Approvers: decide.Approvers{Expr: `"finance" in claims.groups +`}},
		"expression not bool":         {Decision: decide.Approve, Approvers: decide.Approvers{Expr: `principal`}},
		"quorum above the list":       {Decision: decide.Approve, Quorum: 3, Approvers: decide.Approvers{IDs: []string{"token:a", "token:b"}}},
		"quorum above the maximum":    {Decision: decide.Approve, Quorum: decide.MaxQuorum + 1},
		"approvers on allow":          {Decision: decide.Allow, Approvers: decide.Approvers{IDs: []string{"token:a"}}},
		"listed twice":                {Decision: decide.Approve, Approvers: decide.Approvers{IDs: []string{"token:a", "token:a"}}},
	} {
		if _, err := decide.Compile("refund", []decide.Rule{r}); err == nil || !strings.Contains(err.Error(), "decide[0]") {
			t.Errorf("%s: Compile = %v, want an error naming decide[0]", name, err)
		}
	}
}

func TestApproversChangeTheDigest(t *testing.T) {
	plain, _ := decide.Compile("t", []decide.Rule{{Decision: decide.Approve}})
	narrowed, _ := decide.Compile("t", []decide.Rule{{Decision: decide.Approve, Approvers: decide.Approvers{Expr: "true"}}})
	quorum, _ := decide.Compile("t", []decide.Rule{{Decision: decide.Approve, Quorum: 2}})
	if plain.Digest() == narrowed.Digest() || plain.Digest() == quorum.Digest() {
		t.Error("approvers or quorum left the policy digest unchanged")
	}
}
