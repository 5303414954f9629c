package receiptstest

import (
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/receipts"
)

func listCases() []testCase {
	return []testCase{
		{"ListFilters", listFilters},
		{"ListPaginates", listPaginates},
	}
}

// appendMix appends 12 receipts of two tools and three events, one minute
// apart from base, and a few of another tenant.
func appendMix(t *testing.T, s receipts.Store, base time.Time) []receipts.Receipt {
	tools := []string{"refund", "lookup"}
	events := []receipts.Event{receipts.EventExecuted, receipts.EventDenied, receipts.EventApprovalRequested}
	var all []receipts.Receipt
	for i := range 12 {
		at := base.Add(time.Duration(i) * time.Minute)
		all = append(all, mustAppend(t, s, "acme", event(i, tools[i%2], events[i%3], at)))
		if i%4 == 0 {
			mustAppend(t, s, "other", event(i, tools[i%2], events[i%3], at))
		}
	}
	return all
}

func listFilters(t *testing.T, b Backend) {
	base := time.Date(2026, 12, 1, 8, 0, 0, 500, time.UTC)
	all := appendMix(t, b.Replicas[0], base)
	filters := []receipts.Filter{
		{Tool: "refund"},
		{Event: receipts.EventDenied},
		{Tool: "lookup", Event: receipts.EventApprovalRequested},
		{Since: base.Add(3 * time.Minute)},
		{Until: base.Add(5 * time.Minute)},
		{Since: base.Add(2 * time.Minute), Until: base.Add(9 * time.Minute), Tool: "refund"},
		{Tool: "nothing"},
	}
	for _, f := range filters {
		f.Tenant = "acme"
		var want []receipts.Receipt
		for _, r := range all {
			if f.Match(r) {
				want = append(want, r)
			}
		}
		for _, limit := range []int{0, 2} {
			f.Limit = limit
			got := listAll(t, b.Replicas[1], f)
			if len(want) == 0 && len(got) == 0 {
				continue
			}
			sameLines(t, got, want)
		}
	}
}

func listPaginates(t *testing.T, b Backend) {
	all := appendMix(t, b.Replicas[0], time.Now())
	f := receipts.Filter{Tenant: "acme", Limit: 5}
	var got []receipts.Receipt
	var cursors []int64
	for {
		page, next, err := b.Replicas[0].List(t.Context(), f)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) > 5 {
			t.Fatalf("page of %d, limit 5", len(page))
		}
		got = append(got, page...)
		cursors = append(cursors, next)
		if next == 0 {
			break
		}
		f.After = next
	}
	sameLines(t, got, all)
	if len(cursors) != 3 || cursors[0] != 5 || cursors[1] != 10 {
		t.Fatalf("cursors %v, want [5 10 0]", cursors)
	}
	page, next, err := b.Replicas[0].List(t.Context(), receipts.Filter{Tenant: "acme", After: 12})
	if err != nil || len(page) != 0 || next != 0 {
		t.Fatalf("past the end: %d receipts, next %d, %v", len(page), next, err)
	}
	page, _, err = b.Replicas[0].List(t.Context(), receipts.Filter{Tenant: "nobody"})
	if err != nil || len(page) != 0 {
		t.Fatalf("unknown tenant: %d receipts, %v", len(page), err)
	}
}
