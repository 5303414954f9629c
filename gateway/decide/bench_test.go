package decide_test

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/decide"
)

// benchDecide measures one call's decision, the arguments parsed afresh
// each time as the call path would.
func benchDecide(b *testing.B, rules []decide.Rule, args string) {
	b.Helper()
	p, err := decide.Compile("refund", rules)
	if err != nil {
		b.Fatal(err)
	}
	in := &decide.Input{Arguments: []byte(args), Tenant: "acme", Session: "s-1", Step: 7, HasStep: true, API: "rest"}
	ctx := context.Background()
	b.ReportAllocs()
	cpu := processCPU()
	for b.Loop() {
		if _, err := p.Decide(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
	// The wall-clock ns/op of a machine shared with other work overstates
	// the cost; the process's CPU time per op does not.
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
}

// processCPU is the CPU time (user + system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

const refundArgs = `{"amount":2500,"currency":"EUR","order":"o-1234","tags":["priority","repeat"]}`

// BenchmarkDecideSimple is one comparison rule over args.
func BenchmarkDecideSimple(b *testing.B) {
	benchDecide(b, []decide.Rule{{When: "args.amount <= 10000", Decision: decide.Allow}}, refundArgs)
}

// BenchmarkDecideThreeRules is the documented refund policy; the call gets
// to the second rule.
func BenchmarkDecideThreeRules(b *testing.B) {
	benchDecide(b, []decide.Rule{
		{When: "args.amount <= 1000", Decision: decide.Allow},
		{When: "args.amount <= 10000", Decision: decide.Approve, Reason: "finance"},
		{Decision: decide.Deny, Reason: "too much"},
	}, refundArgs)
}

// BenchmarkDecideStringList is a rule over strings and a list.
func BenchmarkDecideStringList(b *testing.B) {
	benchDecide(b, []decide.Rule{{
		When:     `args.currency in ["EUR", "USD", "GBP"] && args.order.startsWith("o-") && "priority" in args.tags && tenant != "trial"`,
		Decision: decide.Allow,
	}}, refundArgs)
}

// BenchmarkDecideIdentityOnly reads no args, so they are never parsed.
func BenchmarkDecideIdentityOnly(b *testing.B) {
	benchDecide(b, []decide.Rule{{When: `tenant == "acme" && api == "rest" && step < 100`, Decision: decide.Allow}}, refundArgs)
}

// BenchmarkDecideLongList walks a list of 1 000 elements (6 000 of
// decide.CostLimit's units), to relate cost units to time.
func BenchmarkDecideLongList(b *testing.B) {
	items := make([]string, 1000)
	for i := range items {
		items[i] = fmt.Sprintf(`{"sku":"s%d","qty":%d}`, i, i%5)
	}
	args := `{"items":[` + strings.Join(items, ",") + `]}`
	benchDecide(b, []decide.Rule{{When: `args.items.all(i, i.qty < 10)`, Decision: decide.Allow}}, args)
}

// BenchmarkMayDecide is the check each approver's decision of a quorum
// rule passes (approver operator, two approvals needed, an approvers
// expression over the decider's claims): the decider is not the
// requester and the expression holds.
func BenchmarkMayDecide(b *testing.B) {
	p, err := decide.Compile("refund", []decide.Rule{{Decision: decide.Approve, Reason: "finance",
		Approvers: decide.Approvers{Expr: `"finance" in claims.groups`}, Quorum: 2}})
	if err != nil {
		b.Fatal(err)
	}
	if p.Quorum(0) != 2 {
		b.Fatalf("quorum %d, want 2", p.Quorum(0))
	}
	d := decide.Decider{ID: "host-user:id.example.com:alice", Person: true, Claims: map[string]any{"groups": []any{"finance", "ops"}}}
	ctx := context.Background()
	b.ReportAllocs()
	cpu := processCPU()
	for b.Loop() {
		if err := p.MayDecide(ctx, 0, decide.Operator, "host-user:id.example.com:agent-7", d); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
}
