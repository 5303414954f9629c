package callpath

import (
	"context"
	"strconv"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/receipts"
)

// Receipts that survive kill -9. With receipts on, a store that keeps a
// receipt outbox (idempotency.ReceiptOutbox) records "executed receipt
// pending" in the completion's own atomic step. The writer clears the
// entries of the receipts it appended (one store call per run, after
// the append, never on the call path). What stays in the outbox is what
// a gateway could not write: it died with the receipt queued, or gave
// up. Every gateway sweeps the outbox at start and then periodically:
// an entry older than recover_after is rebuilt into its executed
// receipt, appended (the receipts store never appends an execution's
// executed receipt twice, so a sweep racing a slow writer, or another
// gateway's sweep, is harmless) and cleared.

// DefaultReceiptRecoverAfter is the default receipts.recover_after:
// longer than the writer's retries (receiptAttempts with backoff, about a
// minute), so the sweep does not race a live writer's retries.
const DefaultReceiptRecoverAfter = 2 * time.Minute

// recoverBatch bounds the entries one sweep round reads: a writer's run
// at most, so a tenant's recovered run fits one append as the writer's
// runs do.
const recoverBatch = receiptMaxRun

// clearOutbox clears the outbox entries of a run just appended and
// reports whether it did. A failure only leaves the entries to the
// sweep, whose append finds them there.
func (w *receiptWriter) clearOutbox(tenant string, refs []idempotency.OutboxRef) bool {
	if w.outbox == nil || len(refs) == 0 {
		return true
	}
	ctx, cancel := context.WithTimeout(w.ctx, storeCallTimeout)
	defer cancel()
	err := w.outbox.ClearReceipts(ctx, refs)
	if err != nil && w.ctx.Err() == nil {
		w.log.Warn("receipt outbox not cleared; the recovery sweep will", "tenant", tenant, "count", len(refs), "error", err)
	}
	return err == nil
}

// recoverLoop sweeps the outbox once at start, then every half
// recover_after.
func (w *receiptWriter) recoverLoop() {
	tick := time.NewTicker(max(w.recoverAfter/2, 100*time.Millisecond))
	defer tick.Stop()
	for {
		for w.recoverOnce() { // a full batch recovered: there may be more
		}
		select {
		case <-tick.C:
		case <-w.ctx.Done():
			return
		}
	}
}

// recoverOnce appends the receipts of one batch of old outbox entries
// and clears them; it reports whether it recovered a full batch.
func (w *receiptWriter) recoverOnce() (more bool) {
	ctx, cancel := context.WithTimeout(w.ctx, time.Minute)
	defer cancel()
	pending, err := w.outbox.PendingReceipts(ctx, time.Now().Add(-w.recoverAfter), recoverBatch)
	if err != nil {
		if w.ctx.Err() == nil {
			w.log.Warn("receipt outbox not read; retried at the next sweep", "error", err)
		}
		return false
	}
	more = len(pending) == recoverBatch
	for _, run := range recoveredRuns(pending) {
		appended, err := w.store.AppendRun(ctx, run.tenant, run.receipts)
		if err != nil {
			if w.ctx.Err() == nil {
				w.log.Warn("recovered receipts not written; retried at the next sweep", "tenant", run.tenant, "count", len(run.receipts), "error", err)
			}
			more = false
			continue
		}
		if len(appended) > 0 {
			w.recovered.Add(float64(len(appended)))
			w.log.Info("receipts recovered from the outbox", "tenant", run.tenant, "count", len(appended))
		}
		if !w.clearOutbox(run.tenant, run.outbox) {
			more = false // the same entries again: wait for the next sweep
		}
	}
	return more
}

// recoveredRuns groups pending entries into one run per tenant of their
// executed receipts.
func recoveredRuns(pending []idempotency.PendingReceipt) []tenantRun {
	batch := make([]queuedReceipt, len(pending))
	for i, p := range pending {
		batch[i] = queuedReceipt{tenant: p.Scope.Tenant, receipt: recoveredReceipt(p), outbox: &pending[i].OutboxRef}
	}
	return runsByTenant(batch)
}

// recoveredReceipt is the executed receipt rebuilt from an outbox entry:
// the call's identity and status, sealed at its completion's time. The
// decision members (decision, rule, policy, observe) are not in the
// entry, so a recovered receipt lacks them.
func recoveredReceipt(p idempotency.PendingReceipt) receipts.Receipt {
	r := receipts.Receipt{Time: p.CompletedAt, Event: receipts.EventExecuted, Tool: p.Scope.Tool,
		Key: receipts.KeyHash(p.Scope.Key), ExecutionID: p.ExecutionID, Status: p.Status}
	if p.Step != nil {
		r.Session, r.Step = p.Step.SessionID, strconv.FormatUint(p.Step.Index, 10)
	}
	return r
}
