package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// RunOutbox runs the receipt outbox cases (idempotency.ReceiptOutbox)
// against stores made by newStore: with outbox true, a store whose
// completions write their outbox entry (receipts on); false, one whose
// completions do not (receipts off). Both are fresh and isolated.
func RunOutbox(t *testing.T, newStore func(t *testing.T, outbox bool) idempotency.Store) {
	t.Helper()
	cases := []struct {
		name string
		run  func(f *fixture, outbox idempotency.ReceiptOutbox)
	}{
		{"CompleteMarksTheReceiptPending", outboxCompleteMarks},
		{"OnlyAnOwnedCompletionMarks", outboxOnlyOwnedCompletion},
		{"ClearRemovesOnlyTheNamedEntries", outboxClear},
		{"ConcurrentCompletionsEachMarkOnce", outboxConcurrent},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store := newStore(t, true)
			t.Cleanup(func() { _ = store.Close() })
			outbox, ok := store.(idempotency.ReceiptOutbox)
			if !ok {
				t.Fatalf("%T keeps no receipt outbox", store)
			}
			tc.run(newFixture(t, store), outbox)
		})
	}
	t.Run("OffWritesNothing", func(t *testing.T) {
		t.Parallel()
		store := newStore(t, false)
		t.Cleanup(func() { _ = store.Close() })
		f := newFixture(t, store)
		lease := f.claimed(f.request(f.scope("charge", f.id("key")), fingerprintA, f.step(f.id("s"), 0)))
		f.complete(lease, jsonResponse(`{"ok":true}`), replayTTL)
		if got := pending(f, store.(idempotency.ReceiptOutbox)); len(got) != 0 {
			t.Fatalf("outbox off: %d entries after a completion, want none", len(got))
		}
	})
}

// pending is every entry completed until a minute from now.
func pending(f *fixture, outbox idempotency.ReceiptOutbox) map[string]idempotency.PendingReceipt {
	f.t.Helper()
	got, err := outbox.PendingReceipts(f.ctx, time.Now().Add(time.Minute), 10000)
	if err != nil {
		f.t.Fatalf("PendingReceipts: %v", err)
	}
	byExec := map[string]idempotency.PendingReceipt{}
	for _, p := range got {
		if _, dup := byExec[p.ExecutionID]; dup {
			f.t.Fatalf("execution %s listed twice", p.ExecutionID)
		}
		byExec[p.ExecutionID] = p
	}
	return byExec
}

// outboxCompleteMarks: a completion leaves an entry that names the call
// and its status, listed once it is older than the cut-off, not before.
func outboxCompleteMarks(f *fixture, outbox idempotency.ReceiptOutbox) {
	step := f.step(f.id("s"), 3)
	lease := f.claimed(f.request(f.scope("charge", f.id("key")), fingerprintA, step))
	before := time.Now()
	f.complete(lease, idempotency.StoredResponse{Status: 201, ContentType: "application/json", Body: []byte(`{}`)}, replayTTL)
	got := pending(f, outbox)
	p, ok := got[lease.ExecutionID]
	if len(got) != 1 || !ok {
		f.t.Fatalf("entries %v, want only %s's", got, lease.ExecutionID)
	}
	if p.Scope != lease.Scope || p.Status != 201 || p.Step == nil || *p.Step != *step {
		f.t.Fatalf("entry %+v, want scope %v, step %+v, status 201", p, lease.Scope, step)
	}
	if !within(p.CompletedAt, before, clockSlack) {
		f.t.Fatalf("completed at %v, want about %v", p.CompletedAt, before)
	}
	old, err := outbox.PendingReceipts(f.ctx, before.Add(-time.Minute), 100)
	if err != nil || len(old) != 0 {
		f.t.Fatalf("entries older than a minute ago: %v, %v; want none", old, err)
	}
}

// outboxOnlyOwnedCompletion: a completion refused for a lost lease, an
// UNKNOWN outcome and a release leave no entry.
func outboxOnlyOwnedCompletion(f *fixture, outbox idempotency.ReceiptOutbox) {
	lost := f.claimed(f.request(f.scope("charge", f.id("key")), fingerprintA, nil))
	stale := lost
	stale.FencingToken++
	if err := f.store.Complete(f.ctx, stale, jsonResponse(`{}`), replayTTL); err == nil {
		f.t.Fatal("Complete with another fencing token succeeded")
	}
	unknown := f.claimed(f.request(f.scope("charge", f.id("key")), fingerprintA, nil))
	f.markUnknown(unknown, replayTTL)
	released := f.claimed(f.request(f.scope("charge", f.id("key")), fingerprintA, nil))
	f.release(released)
	if got := pending(f, outbox); len(got) != 0 {
		f.t.Fatalf("entries %v, want none", got)
	}
}

// outboxClear: ClearReceipts removes the named entries only, and an
// entry already cleared (or never written) is no error.
func outboxClear(f *fixture, outbox idempotency.ReceiptOutbox) {
	var refs []idempotency.OutboxRef
	for i := range 3 {
		lease := f.claimed(f.request(f.scope("charge", f.id("key")), fingerprintA, f.step(f.id("s"), uint64(i))))
		f.complete(lease, jsonResponse(`{}`), replayTTL)
		refs = append(refs, idempotency.OutboxRef{Scope: lease.Scope, Step: lease.Step, ExecutionID: lease.ExecutionID})
	}
	ghost := idempotency.OutboxRef{Scope: f.scope("charge", f.id("key")), ExecutionID: f.id("exec")}
	if err := outbox.ClearReceipts(f.ctx, []idempotency.OutboxRef{refs[0], refs[2], ghost}); err != nil {
		f.t.Fatalf("ClearReceipts: %v", err)
	}
	got := pending(f, outbox)
	if _, ok := got[refs[1].ExecutionID]; len(got) != 1 || !ok {
		f.t.Fatalf("entries %v after clearing two of three, want %s's", got, refs[1].ExecutionID)
	}
	if err := outbox.ClearReceipts(f.ctx, refs); err != nil {
		f.t.Fatalf("ClearReceipts again: %v", err)
	}
	if got := pending(f, outbox); len(got) != 0 {
		f.t.Fatalf("entries %v after clearing all, want none", got)
	}
}

// outboxConcurrent: concurrent completions of different calls each leave
// exactly their own entry, and a limit bounds the answer.
func outboxConcurrent(f *fixture, outbox idempotency.ReceiptOutbox) {
	const calls = 40
	leases := make([]idempotency.Lease, calls)
	for i := range leases {
		leases[i] = f.claimed(f.request(f.scope("charge", f.id("key")), fingerprintA, f.step(f.id("s"), 0)))
	}
	var wg sync.WaitGroup
	errs := make(chan error, calls)
	for _, l := range leases {
		wg.Go(func() {
			if err := f.store.Complete(f.ctx, l, jsonResponse(`{}`), replayTTL); err != nil {
				errs <- fmt.Errorf("Complete(%s): %w", l.ExecutionID, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		f.t.Fatal(err)
	}
	got := pending(f, outbox)
	for _, l := range leases {
		if _, ok := got[l.ExecutionID]; !ok {
			f.t.Errorf("no entry for %s", l.ExecutionID)
		}
	}
	if len(got) != calls {
		f.t.Fatalf("%d entries, want %d", len(got), calls)
	}
	if some, err := outbox.PendingReceipts(f.ctx, time.Now().Add(time.Minute), 10); err != nil || len(some) != 10 {
		f.t.Fatalf("limit 10: %d entries, %v", len(some), err)
	}
}
