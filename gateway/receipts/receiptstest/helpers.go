package receiptstest

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/receipts"
)

// event is the n-th receipt a case appends: the execution id names it.
func event(n int, tool string, ev receipts.Event, at time.Time) receipts.Receipt {
	return receipts.Receipt{
		Time: at, Event: ev, Tool: tool,
		Key:         receipts.KeyHash(fmt.Sprintf("key-%d", n)),
		ExecutionID: fmt.Sprintf("exec-%04d", n),
		Status:      200 + n%3,
	}
}

// mustAppend appends r to tenant's chain on s.
func mustAppend(t *testing.T, s receipts.Store, tenant string, r receipts.Receipt) receipts.Receipt {
	t.Helper()
	sealed, err := s.Append(t.Context(), tenant, r)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	return sealed
}

// listAll collects every page of f.
func listAll(t *testing.T, s receipts.Store, f receipts.Filter) []receipts.Receipt {
	t.Helper()
	var all []receipts.Receipt
	for pages := 0; ; pages++ {
		if pages > 10000 {
			t.Fatal("List never ends")
		}
		page, next, err := s.List(t.Context(), f)
		if err != nil {
			t.Fatalf("List %+v: %v", f, err)
		}
		all = append(all, page...)
		if next == 0 {
			return all
		}
		if next <= f.After {
			t.Fatalf("cursor went from %d to %d", f.After, next)
		}
		f.After = next
	}
}

// export verifies what receipts.Export writes of s.
func exportAndVerify(t *testing.T, s receipts.Store) receipts.Report {
	t.Helper()
	var buf bytes.Buffer
	if err := receipts.Export(t.Context(), s, &buf); err != nil {
		t.Fatalf("Export: %v", err)
	}
	rep, err := receipts.Verify(&buf)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	return rep
}

// tenantReport is tenant's entry of rep.
func tenantReport(t *testing.T, rep receipts.Report, tenant string) receipts.TenantReport {
	t.Helper()
	for _, tr := range rep.Tenants {
		if tr.Tenant == tenant {
			return tr
		}
	}
	t.Fatalf("no chain of %s in %+v", tenant, rep)
	return receipts.TenantReport{}
}

// sameLines fails unless got and want encode to the same lines.
func sameLines(t *testing.T, got, want []receipts.Receipt) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d receipts, want %d", len(got), len(want))
	}
	for i := range got {
		g, _ := receipts.Encode(got[i])
		w, _ := receipts.Encode(want[i])
		if !bytes.Equal(g, w) {
			t.Fatalf("receipt %d:\n got %s\nwant %s", i, g, w)
		}
	}
}
