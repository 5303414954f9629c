package receiptstest

import (
	"fmt"
	"testing"

	"github.com/toolgateway/toolgateway/gateway/receipts"
)

// SizingReceipt is the i-th receipt of the stores' sizing measurements
// (docs/receipts.md, "Sizing"): an executed call with decide rules, ~520
// bytes of JSON, its own key and execution.
func SizingReceipt(i int) receipts.Receipt {
	return receipts.Receipt{
		Event: receipts.EventExecuted, Tool: "refund", Key: receipts.KeyHash(fmt.Sprint("key-", i)),
		Session: "session-1234", Step: "step-7", ExecutionID: fmt.Sprintf("01JEXAMPLEEXECUTIONID%05d", i),
		Status: 201, Decision: "allow", Rule: "decide[0]",
		Policy: receipts.PolicyHash([]byte("policy")),
	}
}

// AppendForSizing appends n SizingReceipts to tenant's chain in the
// writer's runs of 16.
func AppendForSizing(t testing.TB, s receipts.Store, tenant string, n int) {
	t.Helper()
	run := make([]receipts.Receipt, 0, 16)
	for i := range n {
		run = append(run, SizingReceipt(i))
		if len(run) == cap(run) || i == n-1 {
			if _, err := s.AppendRun(t.Context(), tenant, run); err != nil {
				t.Fatal(err)
			}
			run = run[:0]
		}
	}
}
