package receiptstest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/receipts"
)

func dedupeCases() []testCase {
	return []testCase{
		{"AppendNeverRepeatsAnExecutedReceipt", dedupeExecuted},
		{"ConcurrentRunsOfTheSameExecutionsAppendEachOnce", dedupeConcurrent},
	}
}

// executionsOf counts tenant's executed receipts per execution id.
func executionsOf(t *testing.T, s receipts.Store, tenant string) map[string]int {
	t.Helper()
	count := map[string]int{}
	for _, r := range listAll(t, s, receipts.Filter{Tenant: tenant, Event: receipts.EventExecuted}) {
		count[r.ExecutionID]++
	}
	return count
}

// dedupeExecuted: an executed receipt of an execution the chain has is
// left out of a run (the rest of the run is appended), refused by
// Append, and other events of the same execution are not affected.
func dedupeExecuted(t *testing.T, b Backend) {
	now := time.Now()
	first, err := b.Replicas[0].AppendRun(t.Context(), "acme", []receipts.Receipt{
		event(1, "refund", receipts.EventExecuted, now), event(2, "refund", receipts.EventExecuted, now),
	})
	if err != nil || len(first) != 2 {
		t.Fatalf("first run: %d appended, %v", len(first), err)
	}
	second, err := b.Replicas[1].AppendRun(t.Context(), "acme", []receipts.Receipt{
		event(2, "refund", receipts.EventExecuted, now), event(3, "refund", receipts.EventExecuted, now),
		event(3, "refund", receipts.EventExecuted, now), event(1, "refund", receipts.EventMadeUnknown, now),
	})
	if err != nil || len(second) != 2 || second[0].ExecutionID != "exec-0003" || second[1].Event != receipts.EventMadeUnknown {
		t.Fatalf("second run: %+v, %v; want exec-0003's executed and exec-0001's made_unknown", second, err)
	}
	if second[0].Seq != 3 || second[0].Prev != first[1].Hash {
		t.Fatalf("second run sealed at seq %d after %q, want 3 after the first run", second[0].Seq, second[0].Prev)
	}
	if _, err := b.Replicas[0].Append(t.Context(), "acme", event(1, "refund", receipts.EventExecuted, now)); !errors.Is(err, receipts.ErrDuplicate) {
		t.Fatalf("Append of exec-0001 again = %v, want ErrDuplicate", err)
	}
	if rs, err := b.Replicas[0].AppendRun(t.Context(), "acme", []receipts.Receipt{event(3, "refund", receipts.EventExecuted, now)}); err != nil || len(rs) != 0 {
		t.Fatalf("run of an executed one only: %v, %v; want nothing appended", rs, err)
	}
	// Another tenant's chain has its own executions.
	mustAppend(t, b.Replicas[1], "other", event(1, "refund", receipts.EventExecuted, now))
	next := mustAppend(t, b.Replicas[1], "acme", event(4, "refund", receipts.EventExecuted, now))
	if next.Seq != 5 {
		t.Fatalf("next receipt at seq %d, want 5", next.Seq)
	}
	if got := executionsOf(t, b.Replicas[0], "acme"); len(got) != 4 || got["exec-0001"] != 1 || got["exec-0003"] != 1 {
		t.Fatalf("executed receipts per execution: %v", got)
	}
	if rep := exportAndVerify(t, b.Replicas[0]); !rep.OK() {
		t.Fatalf("Verify: %+v", rep)
	}
}

// dedupeConcurrent: two replicas append overlapping runs of the same
// executions at once (the writer and a recovery sweep): each execution
// lands once and the chain stays one.
func dedupeConcurrent(t *testing.T, b Backend) {
	now := time.Now()
	const executions = 40
	var wg sync.WaitGroup
	errs := make(chan error, 2*executions)
	for r, s := range b.Replicas {
		wg.Go(func() {
			for i := 0; i < executions; i += 4 {
				var run []receipts.Receipt
				for j := range 4 + r*2 { // runs of 4 and 6: they overlap differently
					run = append(run, event((i+j)%executions, "refund", receipts.EventExecuted, now))
				}
				if _, err := s.AppendRun(t.Context(), "acme", run); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got := executionsOf(t, b.Replicas[0], "acme")
	for id, n := range got {
		if n != 1 {
			t.Errorf("%s has %d executed receipts", id, n)
		}
	}
	if len(got) != executions {
		t.Fatalf("%d executions receipted, want %d", len(got), executions)
	}
	if rep := exportAndVerify(t, b.Replicas[1]); !rep.OK() || tenantReport(t, rep, "acme").Checked != executions {
		t.Fatalf("Verify: %+v", rep)
	}
}
