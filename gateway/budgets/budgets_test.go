package budgets_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/budgets"
)

func daily(name string) budgets.Budget {
	return budgets.Budget{Name: name, Limit: 5000, Scope: budgets.ScopeTenant,
		Window: budgets.Window{Calendar: "day", TimeZone: "Europe/Berlin"}}
}

// TestNewRefuses: each bad configuration is refused with a message naming
// what is wrong.
func TestNewRefuses(t *testing.T) {
	ok := map[string][]budgets.Charge{"refund": {{Budget: "refunds-daily", Cost: "args.amount"}}}
	cases := map[string]struct {
		budgets []budgets.Budget
		charges map[string][]budgets.Charge
		want    string
	}{
		"bad name":          {[]budgets.Budget{daily("refunds daily")}, nil, "budget name"},
		"twice":             {[]budgets.Budget{daily("a"), daily("a")}, nil, "defined twice"},
		"negative limit":    {[]budgets.Budget{{Name: "a", Limit: -1, Scope: "tenant", Window: budgets.Window{Calendar: "day"}}}, nil, "limit"},
		"no window":         {[]budgets.Budget{{Name: "a", Limit: 1, Scope: "tenant"}}, nil, "window"},
		"week":              {[]budgets.Budget{{Name: "a", Limit: 1, Scope: "tenant", Window: budgets.Window{Calendar: "week"}}}, nil, "calendar \"week\""},
		"bad zone":          {[]budgets.Budget{{Name: "a", Limit: 1, Scope: "tenant", Window: budgets.Window{Calendar: "day", TimeZone: "Mars/Olympus"}}}, nil, "time_zone"},
		"rolling and tz":    {[]budgets.Budget{{Name: "a", Limit: 1, Scope: "tenant", Window: budgets.Window{Rolling: "24h", TimeZone: "UTC"}}}, nil, "rolling takes no"},
		"rolling too short": {[]budgets.Budget{{Name: "a", Limit: 1, Scope: "tenant", Window: budgets.Window{Rolling: "5ms"}}}, nil, "at least 1s"},
		"unknown scope":     {[]budgets.Budget{{Name: "a", Limit: 1, Scope: "session", Window: budgets.Window{Calendar: "day"}}}, nil, "scope \"session\""},
		"unknown budget":    {nil, ok, "no budget named"},
		"charged twice":     {[]budgets.Budget{daily("refunds-daily")}, map[string][]budgets.Charge{"refund": {ok["refund"][0], ok["refund"][0]}}, "charged twice"},
		"no cost":           {[]budgets.Budget{daily("refunds-daily")}, map[string][]budgets.Charge{"refund": {{Budget: "refunds-daily"}}}, "cost is required"},
		"cost not number":   {[]budgets.Budget{daily("refunds-daily")}, map[string][]budgets.Charge{"refund": {{Budget: "refunds-daily", Cost: `"ten"`}}}, "want a number"},
		"cost syntax":       {[]budgets.Budget{daily("refunds-daily")}, map[string][]budgets.Charge{"refund": {{Budget: "refunds-daily", Cost: "args.amount +"}}}, "cost"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := budgets.New(c.budgets, c.charges)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want one containing %q", err, c.want)
			}
		})
	}
}

// TestEvaluate: a call's charges carry its cost in millionths, its
// bucket (budget, tenant, and the calendar window in the budget's time
// zone), and the window's start; bad costs are ErrCost.
func TestEvaluate(t *testing.T) {
	set, err := budgets.New([]budgets.Budget{daily("refunds-daily"),
		{Name: "per-tool", Limit: 10, Scope: budgets.ScopeTenantTool, Window: budgets.Window{Rolling: "1h"}}},
		map[string][]budgets.Charge{"refund": {{Budget: "refunds-daily", Cost: "args.amount"}, {Budget: "per-tool", Cost: "1"}}})
	if err != nil {
		t.Fatal(err)
	}
	if set.Charges("other") || !set.Charges("refund") {
		t.Fatal("Charges")
	}
	// 23:30 UTC on 7 December is 00:30 on the 8th in Berlin.
	now := time.Date(2026, 12, 7, 23, 30, 0, 0, time.UTC)
	got, err := set.Evaluate(context.Background(), budgets.Call{Tool: "refund", Tenant: "acme", Arguments: []byte(`{"amount":90.5}`), Now: now})
	if err != nil || len(got) != 2 {
		t.Fatalf("%v %v", got, err)
	}
	day := got[0]
	berlin, _ := time.LoadLocation("Europe/Berlin")
	if day.Budget != "refunds-daily" || day.Cost != 90_500_000 || day.Limit != 5000*budgets.Unit ||
		!day.Since.Equal(time.Date(2026, 12, 8, 0, 0, 0, 0, berlin)) || day.Bucket != "refunds-daily|t:acme|w:2026-12-08T00" {
		t.Fatalf("daily charge %+v", day)
	}
	if at := set.ResetsAt("refunds-daily", now); !at.Equal(time.Date(2026, 12, 9, 0, 0, 0, 0, berlin)) {
		t.Fatalf("resets at %v", at)
	}
	roll := got[1]
	if roll.Bucket != "per-tool|t:acme|tool:refund" || roll.Cost != budgets.Unit || !roll.Since.Equal(now.Add(-time.Hour)) {
		t.Fatalf("rolling charge %+v", roll)
	}
	// The same call a day later is another window's bucket: never two.
	next, _ := set.Evaluate(context.Background(), budgets.Call{Tool: "refund", Tenant: "acme", Arguments: []byte(`{"amount":1}`), Now: now.Add(24 * time.Hour)})
	if next[0].Bucket == day.Bucket {
		t.Fatal("a day later shares the bucket")
	}
	for _, args := range []string{`{}`, `{"amount":-1}`, `{"amount":"9"}`, `{"amount":1e13}`} {
		_, err := set.Evaluate(context.Background(), budgets.Call{Tool: "refund", Tenant: "acme", Arguments: []byte(args), Now: now})
		if !errors.Is(err, budgets.ErrCost) {
			t.Errorf("%s: %v, want ErrCost", args, err)
		}
	}
}

// TestRequesterScope: a requester budget keeps one bucket per principal of
// a tenant (the calls without one share a bucket), and Windows names the
// requester's window.
func TestRequesterScope(t *testing.T) {
	set, err := budgets.New([]budgets.Budget{{Name: "per-person", Limit: 10, Scope: budgets.ScopeRequester, Window: budgets.Window{Calendar: "day"}}},
		map[string][]budgets.Charge{"send": {{Budget: "per-person", Cost: "1"}}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	bucket := func(requester string) string {
		got, err := set.Evaluate(context.Background(), budgets.Call{Tool: "send", Tenant: "acme", Requester: requester, Arguments: []byte(`{}`), Now: now})
		if err != nil || len(got) != 1 {
			t.Fatalf("%v %v", got, err)
		}
		return got[0].Bucket
	}
	ann, bob, nobody := bucket("oidc:idp.example/ann"), bucket("oidc:idp.example/bob"), bucket("")
	if ann != "per-person|t:acme|p:oidc:idp.example/ann|w:2026-12-07T00" || ann == bob || nobody == ann || nobody == bob {
		t.Fatalf("buckets ann %q, bob %q, without a principal %q", ann, bob, nobody)
	}
	w := set.Windows("acme", "oidc:idp.example/ann", now)
	if len(w) != 1 || w[0].Bucket != ann || w[0].Requester != "oidc:idp.example/ann" {
		t.Fatalf("windows %+v", w)
	}
}
