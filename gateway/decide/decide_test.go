package decide_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/toolgateway/toolgateway/gateway/decide"
)

// refundRules is the documented example policy.
var refundRules = []decide.Rule{
	{When: "args.amount <= 1000", Decision: decide.Allow},
	{When: "args.amount <= 10000", Decision: decide.Approve, Reason: "refunds above 1 000 need finance"},
	{Decision: decide.Deny, Reason: "refunds above 10 000 are not an agent's call"},
}

func mustCompile(t testing.TB, tool string, rules []decide.Rule) *decide.Policy {
	t.Helper()
	p, err := decide.Compile(tool, rules)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func restCall(args string) *decide.Input {
	return &decide.Input{Arguments: []byte(args), Tenant: "acme", Session: "s-1", Step: 3, HasStep: true, API: "rest"}
}

// TestDecideFirstMatchWins checks the ordered rules of the refund policy.
func TestDecideFirstMatchWins(t *testing.T) {
	p := mustCompile(t, "refund", refundRules)
	cases := []struct {
		args     string
		decision decide.Decision
		rule     int
		reason   string
		approver decide.Approver
	}{
		{`{"amount":1000}`, decide.Allow, 0, "", ""},
		{`{"amount":999.5}`, decide.Allow, 0, "", ""},
		{`{"amount":1000.5}`, decide.Approve, 1, "refunds above 1 000 need finance", decide.Operator},
		{`{"amount":10000}`, decide.Approve, 1, "refunds above 1 000 need finance", decide.Operator},
		{`{"amount":10001}`, decide.Deny, 2, "refunds above 10 000 are not an agent's call", ""},
		{`{"amount":1e+21}`, decide.Deny, 2, "refunds above 10 000 are not an agent's call", ""},
	}
	for _, tc := range cases {
		v, err := p.Decide(context.Background(), restCall(tc.args))
		if err != nil {
			t.Fatalf("%s: %v", tc.args, err)
		}
		want := decide.Verdict{Decision: tc.decision, Rule: tc.rule, Reason: tc.reason, Approver: tc.approver}
		if v != want {
			t.Errorf("%s: verdict %+v, want %+v", tc.args, v, want)
		}
	}
}

// TestDecideWithoutRulesAllows checks no decide configuration changes nothing.
func TestDecideWithoutRulesAllows(t *testing.T) {
	var nilPolicy *decide.Policy
	for _, p := range []*decide.Policy{nilPolicy, mustCompile(t, "lookup", nil)} {
		v, err := p.Decide(context.Background(), restCall(`not even JSON`))
		if err != nil || v.Decision != decide.Allow || v.Rule != -1 || !v.Enforced() {
			t.Errorf("Decide without rules = %+v, %v; want an enforced allow by no rule", v, err)
		}
	}
}

// TestDecideNoMatchDenies checks rules that all fail deny the call.
func TestDecideNoMatchDenies(t *testing.T) {
	p := mustCompile(t, "refund", refundRules[:2])
	v, err := p.Decide(context.Background(), restCall(`{"amount":50000}`))
	if err != nil || v.Decision != decide.Deny || v.Rule != -1 || v.Reason == "" {
		t.Errorf("Decide = %+v, %v; want a deny by no rule, with a reason", v, err)
	}
}

// TestDecideFailsClosed checks an evaluation error denies, with an error
// naming the tool and the failing rule.
func TestDecideFailsClosed(t *testing.T) {
	p := mustCompile(t, "refund", []decide.Rule{
		{When: `tenant == "trial"`, Decision: decide.Deny},
		{When: "args.amount <= 1000", Decision: decide.Allow},
		{Decision: decide.Allow},
	})
	cases := []struct{ args, want string }{
		{`{"currency":"EUR"}`, "no such key: amount"},
		{`{"amount":"12"}`, "no such overload"},
		{`[1,2]`, "args: json: cannot unmarshal array"},
		{`null`, "args: not a JSON object"},
		{`{"amount":`, "args: unexpected end of JSON input"},
	}
	for _, tc := range cases {
		v, err := p.Decide(context.Background(), restCall(tc.args))
		if err == nil || !strings.Contains(err.Error(), `tool "refund": decide[1]: evaluate: `) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming decide[1] and %q", tc.args, err, tc.want)
		}
		if v.Decision != decide.Deny || v.Rule != 1 || v.Reason == "" {
			t.Errorf("%s: verdict %+v, want a deny by rule 1 with a reason", tc.args, v)
		}
	}
}

// TestDecideCostLimit checks a rule that would walk too much is stopped
// and denies.
func TestDecideCostLimit(t *testing.T) {
	p := mustCompile(t, "bulk", []decide.Rule{{When: `args.items.all(i, i < 10)`, Decision: decide.Allow}})
	short := `{"items":[` + strings.Repeat("1,", 99) + `1]}`
	if v, err := p.Decide(context.Background(), restCall(short)); err != nil || v.Decision != decide.Allow {
		t.Fatalf("100 items: %+v, %v; want allow", v, err)
	}
	long := `{"items":[` + strings.Repeat("1,", decide.CostLimit) + `1]}`
	v, err := p.Decide(context.Background(), restCall(long))
	if err == nil || !strings.Contains(err.Error(), "cost limit exceeded") || v.Decision != decide.Deny {
		t.Errorf("%d items: %+v, %v; want a deny for the cost limit", decide.CostLimit+1, v, err)
	}
}

// TestDecideCancelled checks a cancelled call stops a long rule.
func TestDecideCancelled(t *testing.T) {
	p := mustCompile(t, "bulk", []decide.Rule{{When: `args.items.all(i, i < 10)`, Decision: decide.Allow}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	v, err := p.Decide(ctx, restCall(`{"items":[`+strings.Repeat("1,", 999)+`1]}`))
	if !errors.Is(err, context.Canceled) || v.Decision != decide.Deny {
		t.Errorf("Decide(cancelled) = %+v, %v; want a deny wrapping context.Canceled", v, err)
	}
}

// TestDecideIdentity checks the variables besides args.
func TestDecideIdentity(t *testing.T) {
	p := mustCompile(t, "refund", []decide.Rule{
		{When: `tool == "refund" && tenant == "acme" && session == "s-1" && step == 3 && api == "mcp"`, Decision: decide.Allow},
		{When: `session == "" && step == -1`, Decision: decide.Approve},
		{Decision: decide.Deny},
	})
	in := restCall(`{}`)
	in.API = "mcp"
	if v, _ := p.Decide(context.Background(), in); v.Decision != decide.Allow {
		t.Errorf("identity match: %+v, want allow", v)
	}
	in.API = "rest"
	if v, _ := p.Decide(context.Background(), in); v.Decision != decide.Deny {
		t.Errorf("api rest: %+v, want deny", v)
	}
	opaque := &decide.Input{Arguments: []byte(`{}`), Tenant: "acme", Step: 3, API: "rest"}
	if v, _ := p.Decide(context.Background(), opaque); v.Decision != decide.Approve {
		t.Errorf("no session or step: %+v, want approve (step is -1 without HasStep)", v)
	}
}

// TestDecideArgsUnreadNotParsed checks arguments no rule reads are never
// parsed: malformed ones do not fail rules that do not look at them.
func TestDecideArgsUnreadNotParsed(t *testing.T) {
	p := mustCompile(t, "refund", []decide.Rule{{When: `tenant == "acme"`, Decision: decide.Allow}})
	if v, err := p.Decide(context.Background(), restCall(`{broken`)); err != nil || v.Decision != decide.Allow {
		t.Errorf("Decide = %+v, %v; want allow without parsing args", v, err)
	}
}

// TestDecideArgumentTypes checks JSON values as rules see them.
func TestDecideArgumentTypes(t *testing.T) {
	args := `{"count":3,"ratio":0.5,"big":1e+21,"name":"Ada","tags":["a","b"],"nested":{"ok":true},"none":null}`
	for _, when := range []string{
		`args.count == 3 && type(args.count) == int`,
		`args.ratio == 0.5 && type(args.ratio) == double`,
		`type(args.big) == double && args.big > 1000`,
		`args.name.startsWith("A") && size(args.name) == 3`,
		`args.tags[1] == "b" && "a" in args.tags && size(args.tags) == 2`,
		`args.nested.ok == true`,
		`args.none == null`,
		`!has(args.missing) && has(args.count)`,
	} {
		p := mustCompile(t, "t", []decide.Rule{{When: when, Decision: decide.Allow}})
		if v, err := p.Decide(context.Background(), restCall(args)); err != nil || v.Decision != decide.Allow {
			t.Errorf("%s: %+v, %v; want allow", when, v, err)
		}
	}
}

// TestDecideConcurrent checks one Policy serves concurrent calls (run with
// -race).
func TestDecideConcurrent(t *testing.T) {
	p := mustCompile(t, "refund", refundRules)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				amount := []string{"5", "5000", "50000"}[(g+i)%3]
				want := map[string]decide.Decision{"5": decide.Allow, "5000": decide.Approve, "50000": decide.Deny}[amount]
				v, err := p.Decide(context.Background(), restCall(`{"amount":`+amount+`}`))
				if err != nil || v.Decision != want {
					t.Errorf("amount %s: %+v, %v; want %s", amount, v, err, want)
					return
				}
			}
		})
	}
	wg.Wait()
}
