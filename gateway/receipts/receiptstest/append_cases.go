package receiptstest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/receipts"
)

func appendCases() []testCase {
	return []testCase{
		{"AppendChainsInOrderPerTenant", appendInOrder},
		{"AppendWithoutTenantIsRefused", appendWithoutTenant},
		{"AppendOutOfRangeTimeIsRefused", appendOutOfRangeTime},
		{"ConcurrentAppendsFromTwoReplicasNeverFork", concurrentAppends},
		{"AppendRunChainsARunAfterAnotherReplica", appendRun},
	}
}

// appendRun: a run is sealed and stored in order, one after the other;
// a run sealed after a head another replica moved is resealed after the
// new head, whole, so the chain stays one.
func appendRun(t *testing.T, b Backend) {
	now := time.Now()
	run := func(from, n int) []receipts.Receipt {
		var rs []receipts.Receipt
		for i := range n {
			rs = append(rs, event(from+i, "refund", receipts.EventExecuted, now))
		}
		return rs
	}
	first, err := b.Replicas[0].AppendRun(t.Context(), "acme", run(0, 3))
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, b.Replicas[1], "acme", event(3, "refund", receipts.EventDenied, now))
	second, err := b.Replicas[0].AppendRun(t.Context(), "acme", run(4, 200))
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 3 || first[2].Seq != 3 || len(second) != 200 || second[0].Seq != 5 || second[199].Seq != 204 {
		t.Fatalf("runs sealed at seqs %d..%d and %d..%d", first[0].Seq, first[len(first)-1].Seq, second[0].Seq, second[len(second)-1].Seq)
	}
	got := listAll(t, b.Replicas[1], receipts.Filter{Tenant: "acme"})
	sameLines(t, got[5:], second[1:])
	if rep := exportAndVerify(t, b.Replicas[1]); !rep.OK() || tenantReport(t, rep, "acme").Checked != 204 {
		t.Fatalf("Verify: %+v", rep)
	}
	if rs, err := b.Replicas[0].AppendRun(t.Context(), "acme", nil); err != nil || len(rs) != 0 {
		t.Fatalf("empty run: %v, %v", rs, err)
	}
}

func appendInOrder(t *testing.T, b Backend) {
	s := b.Replicas[0]
	now := time.Now()
	var a, c []receipts.Receipt
	for i := range 5 {
		a = append(a, mustAppend(t, s, "acme", event(i, "refund", receipts.EventExecuted, now)))
		if i%2 == 0 {
			c = append(c, mustAppend(t, s, "corp", event(i, "refund", receipts.EventDenied, now)))
		}
	}
	for i, r := range a {
		if r.Seq != int64(i+1) || r.Tenant != "acme" || !receipts.Valid(r) {
			t.Fatalf("append %d: seq %d tenant %s valid %v", i, r.Seq, r.Tenant, receipts.Valid(r))
		}
		if i > 0 && r.Prev != a[i-1].Hash {
			t.Fatalf("seq %d: prev is not seq %d's hash", r.Seq, i)
		}
	}
	sameLines(t, listAll(t, s, receipts.Filter{Tenant: "acme"}), a)
	sameLines(t, listAll(t, b.Replicas[1], receipts.Filter{Tenant: "corp"}), c)
	tenants, err := s.Tenants(t.Context())
	if err != nil || fmt.Sprint(tenants) != "[acme corp]" {
		t.Fatalf("Tenants = %v, %v", tenants, err)
	}
	if rep := exportAndVerify(t, s); !rep.OK() || tenantReport(t, rep, "acme").Checked != 5 {
		t.Fatalf("Verify: %+v", rep)
	}
}

func appendWithoutTenant(t *testing.T, b Backend) {
	_, err := b.Replicas[0].Append(t.Context(), "", event(1, "refund", receipts.EventExecuted, time.Now()))
	if !errors.Is(err, receipts.ErrTenantRequired) {
		t.Fatalf("Append without tenant: %v, want ErrTenantRequired", err)
	}
	if _, _, err := b.Replicas[0].List(t.Context(), receipts.Filter{}); !errors.Is(err, receipts.ErrTenantRequired) {
		t.Fatalf("List without tenant: %v, want ErrTenantRequired", err)
	}
}

// concurrentAppends: 8 goroutines, half on each replica, append at once.
// Every append gets its own seq, the seqs are 1..N without a gap, and the
// chain verifies: no fork, no lost receipt.
func concurrentAppends(t *testing.T, b Backend) {
	const workers, each = 8, 25
	var wg sync.WaitGroup
	seqOf := make([]int64, workers*each)
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			s := b.Replicas[w%2]
			for i := range each {
				n := w*each + i
				r, err := s.Append(t.Context(), "acme", event(n, "refund", receipts.EventExecuted, time.Time{}))
				if err != nil {
					errs <- err
					return
				}
				seqOf[n] = r.Seq
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Append: %v", err)
	}
	all := listAll(t, b.Replicas[0], receipts.Filter{Tenant: "acme", Limit: receipts.MaxLimit})
	if len(all) != workers*each {
		t.Fatalf("%d receipts stored, want %d", len(all), workers*each)
	}
	for i, r := range all {
		var n int
		if _, err := fmt.Sscanf(r.ExecutionID, "exec-%d", &n); err != nil {
			t.Fatalf("receipt %d: execution id %q", i, r.ExecutionID)
		}
		if r.Seq != int64(i+1) || seqOf[n] != r.Seq {
			t.Fatalf("position %d holds seq %d of append %d, which was answered seq %d", i, r.Seq, n, seqOf[n])
		}
	}
	rep := exportAndVerify(t, b.Replicas[1])
	if tr := tenantReport(t, rep, "acme"); tr.Failure != nil || tr.Checked != workers*each {
		t.Fatalf("Verify: %+v", tr)
	}
}

func appendOutOfRangeTime(t *testing.T, b Backend) {
	r := event(1, "refund", receipts.EventExecuted, time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))
	if _, err := b.Replicas[0].Append(t.Context(), "acme", r); err == nil {
		t.Fatal("Append of a receipt in the year 10000 succeeded")
	}
	if got := listAll(t, b.Replicas[0], receipts.Filter{Tenant: "acme"}); len(got) != 0 {
		t.Fatalf("%d receipts stored", len(got))
	}
}
