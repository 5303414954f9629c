package decide_test

import (
	"context"
	"testing"

	"github.com/toolgateway/toolgateway/gateway/decide"
)

// FuzzDecide compiles any expression and decides any arguments with it: it
// must never panic, and a call is allowed only by a rule that matched
// without error.
func FuzzDecide(f *testing.F) {
	f.Add("args.amount <= 1000", []byte(`{"amount":5}`))
	f.Add(`args.items.exists(i, i.sku.startsWith("x"))`, []byte(`{"items":[{"sku":"xy"}]}`))
	f.Add(`tenant == "acme" || step > 3`, []byte(`[]`))
	f.Add(`args.a.b.c == null`, []byte(`{"a":{"b":{"c":null}}}`))
	f.Fuzz(func(t *testing.T, when string, args []byte) {
		p, err := decide.Compile("fuzz", []decide.Rule{{When: when, Decision: decide.Allow}})
		if err != nil {
			return
		}
		v, err := p.Decide(context.Background(), &decide.Input{Arguments: args, API: "rest"})
		switch {
		case err != nil && (v.Decision != decide.Deny || v.Rule != 0):
			t.Fatalf("error %v with verdict %+v; want a deny by rule 0", err, v)
		case err == nil && v.Decision == decide.Allow && v.Rule != 0:
			t.Fatalf("allowed by rule %d", v.Rule)
		case err == nil && v.Decision != decide.Allow && (v.Decision != decide.Deny || v.Rule != -1):
			t.Fatalf("verdict %+v; want allow by rule 0 or deny by no rule", v)
		}
	})
}
