package callpath

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgateway/toolgateway/gateway/decide"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/principal"
	"github.com/toolgateway/toolgateway/gateway/receipts"
	"github.com/toolgateway/toolgateway/wire"
)

// The receipt stage: every consequential event of a call (executed, denied,
// an approval requested or expired, a record made UNKNOWN) and of an
// operator (an approval granted or denied, a record resolved or deleted)
// leaves a receipt in the tenant's hash chain (package receipts).
//
// The call path only enqueues: a receiptWriter goroutine per Engine appends
// with retries, so writing a receipt never makes a tool wait or run twice.
// The queue is in memory; what is still in it when the process dies
// (kill -9) is recovered from the store's receipt outbox, for an executed
// call, by another gateway's sweep (receiptrecovery.go). Drain flushes the
// queue within its deadline, and every
// receipt the writer gives up on (queue full, store failing past the
// retries, drain deadline) is counted in gateway_receipts_unwritten_total
// and logged with its fields, never dropped silently.

// Defaults of the receipt writer.
const (
	// receiptQueueSize bounds the receipts waiting for the store: at 1 000
	// calls a second, eight seconds of store outage.
	receiptQueueSize = 8192
	// receiptAttempts bounds one receipt's appends (backoff from
	// receiptBackoff doubling up to receiptMaxBackoff: about a minute).
	receiptAttempts   = 12
	receiptBackoff    = 50 * time.Millisecond
	receiptMaxBackoff = 8 * time.Second
	// receiptExpireEvery is how often receipts older than the retention
	// are deleted.
	receiptExpireEvery = time.Hour
	// receiptMaxRun bounds the receipts written in one batch (a Redis
	// script takes a run as arguments: far below Lua's stack limit).
	receiptMaxRun = 256
)

// ReceiptHook is the narrow entry other parts of the gateway (effect keys,
// reconciliation) use to leave a receipt: it enqueues r for tenant's chain
// and returns at once. A nil hook (receipts off) does nothing.
type ReceiptHook func(tenant string, r receipts.Receipt)

// Receipt returns the Engine's [ReceiptHook]: for an effect conflict
// ([receipts.EventEffectConflict]) or a record resolved by reconciliation
// ([receipts.EventResolved] with By [receipts.ByReconcile]).
func (s *Engine) Receipt() ReceiptHook {
	return func(tenant string, r receipts.Receipt) { s.receipts.enqueue(tenant, r) }
}

// receiptWriter appends the enqueued receipts to the store, one goroutine
// per Engine. A nil writer (receipts off) ignores everything.
type receiptWriter struct {
	store     receipts.Store
	queue     chan queuedReceipt
	pending   sync.WaitGroup // receipts enqueued and not yet written or given up
	unwritten prometheus.Counter
	recovered prometheus.Counter
	log       *slog.Logger
	retention time.Duration
	// outbox is the store's receipt outbox (nil: none): the writer clears
	// the entries of what it appended, the sweep recovers the others.
	outbox       idempotency.ReceiptOutbox
	recoverAfter time.Duration
	ctx          context.Context // cancelled when a drain's deadline passes
	cancel       context.CancelFunc
}

type queuedReceipt struct {
	tenant  string
	receipt receipts.Receipt
	// outbox names the completion's outbox entry of an executed call
	// (nil: none), cleared once the receipt is appended.
	outbox *idempotency.OutboxRef
}

// receiptWriterConfig is what newReceiptWriter needs.
type receiptWriterConfig struct {
	store                   receipts.Store
	retention, recoverAfter time.Duration
	outbox                  idempotency.ReceiptOutbox
	unwritten, recovered    prometheus.Counter
	log                     *slog.Logger
}

// newReceiptWriter starts the writer, its expiry and, with an outbox, its
// recovery sweep; nil when the receipts store is nil.
func newReceiptWriter(c receiptWriterConfig) *receiptWriter {
	if c.store == nil {
		return nil
	}
	w := &receiptWriter{store: c.store, queue: make(chan queuedReceipt, receiptQueueSize), unwritten: c.unwritten,
		recovered: c.recovered, log: c.log, retention: orDefault(c.retention, receipts.DefaultRetention),
		outbox: c.outbox, recoverAfter: orDefault(c.recoverAfter, DefaultReceiptRecoverAfter)}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	go w.run()
	go w.expire()
	if w.outbox != nil {
		go w.recoverLoop()
	}
	return w
}

// enqueue hands r to the writer without waiting; a full queue counts it
// unwritten.
func (w *receiptWriter) enqueue(tenant string, r receipts.Receipt) {
	w.enqueueWith(tenant, r, nil)
}

// enqueueWith is enqueue of an executed call's receipt whose completion
// wrote the outbox entry ref (nil: none).
func (w *receiptWriter) enqueueWith(tenant string, r receipts.Receipt, ref *idempotency.OutboxRef) {
	if w == nil {
		return
	}
	if r.Time.IsZero() {
		r.Time = time.Now()
	}
	w.pending.Add(1)
	select {
	case w.queue <- queuedReceipt{tenant: tenant, receipt: r, outbox: ref}:
	default:
		w.giveUp(tenant, r, errors.New("receipt queue full"))
		w.pending.Done()
	}
}

// run appends the queued receipts in order until the writer is closed:
// what queued up meanwhile, up to receiptMaxRun, is written as one run
// per tenant (one store round trip each, in the tenant's order).
func (w *receiptWriter) run() {
	batch := make([]queuedReceipt, 0, receiptMaxRun)
	for {
		select {
		case q := <-w.queue:
			batch = append(batch[:0], q)
		more:
			for len(batch) < receiptMaxRun {
				select {
				case q := <-w.queue:
					batch = append(batch, q)
				default:
					break more
				}
			}
			for _, run := range runsByTenant(batch) {
				w.write(run)
			}
			w.pending.Add(-len(batch))
		case <-w.ctx.Done():
			for {
				select {
				case q := <-w.queue:
					w.giveUp(q.tenant, q.receipt, w.ctx.Err())
					w.pending.Done()
				default:
					return
				}
			}
		}
	}
}

// tenantRun is the receipts of one tenant in a batch, in queue order,
// and the outbox entries of its executed ones.
type tenantRun struct {
	tenant   string
	receipts []receipts.Receipt
	outbox   []idempotency.OutboxRef
}

// runsByTenant splits batch into one run per tenant, tenants in the order
// of their first receipt, each run in queue order.
func runsByTenant(batch []queuedReceipt) []tenantRun {
	var runs []tenantRun
	for _, q := range batch {
		i := slices.IndexFunc(runs, func(r tenantRun) bool { return r.tenant == q.tenant })
		if i < 0 {
			runs = append(runs, tenantRun{tenant: q.tenant})
			i = len(runs) - 1
		}
		runs[i].receipts = append(runs[i].receipts, q.receipt)
		if q.outbox != nil {
			runs[i].outbox = append(runs[i].outbox, *q.outbox)
		}
	}
	return runs
}

// write appends one tenant's run, retrying with backoff.
func (w *receiptWriter) write(run tenantRun) {
	backoff := receiptBackoff
	var err error
	for attempt := range receiptAttempts {
		ctx, cancel := context.WithTimeout(w.ctx, storeCallTimeout)
		_, err = w.store.AppendRun(ctx, run.tenant, run.receipts)
		cancel()
		if err == nil {
			w.clearOutbox(run.tenant, run.outbox)
			return
		}
		if attempt == 0 {
			w.log.Warn("receipts not written yet; retrying", "tenant", run.tenant, "count", len(run.receipts), "error", err)
		}
		select {
		case <-time.After(backoff):
		case <-w.ctx.Done():
			w.giveUpRun(run, err)
			return
		}
		backoff = min(2*backoff, receiptMaxBackoff)
	}
	w.giveUpRun(run, err)
}

// giveUpRun gives up every receipt of run.
func (w *receiptWriter) giveUpRun(run tenantRun, err error) {
	for _, r := range run.receipts {
		w.giveUp(run.tenant, r, err)
	}
}

// giveUp counts and logs a receipt that will not be written, with what it
// said (its key is already a hash).
func (w *receiptWriter) giveUp(tenant string, r receipts.Receipt, err error) {
	w.unwritten.Inc()
	w.log.Error("receipt not written", "tenant", tenant, "event", r.Event, "tool", r.Tool, "key_sha256", r.Key,
		"execution_id", r.ExecutionID, "status", r.Status, "by", r.By, "time", r.Time, "error", err)
}

// expire deletes receipts older than the retention, hourly.
func (w *receiptWriter) expire() {
	tick := time.NewTicker(receiptExpireEvery)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(w.ctx, time.Minute)
		n, err := w.store.Expire(ctx, time.Now().Add(-w.retention))
		cancel()
		switch {
		case err != nil && w.ctx.Err() == nil:
			w.log.Warn("receipts expiry failed; retried in an hour", "error", err)
		case n > 0:
			w.log.Info("receipts expired", "count", n, "retention", w.retention.String())
		}
		select {
		case <-tick.C:
		case <-w.ctx.Done():
			return
		}
	}
}

// flush waits for the queued receipts to be written until ctx ends, then
// stops the writer (what is left is counted unwritten).
func (w *receiptWriter) flush(ctx context.Context) error {
	if w == nil {
		return nil
	}
	done := make(chan struct{})
	go func() {
		w.pending.Wait()
		close(done)
	}()
	defer w.cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		w.cancel()
		<-done
		return fmt.Errorf("gateway: receipts not flushed: %w", ctx.Err())
	}
}

// receipt is the receipt stage: after the stages ended the call, it
// enqueues the receipt of what happened, if it was consequential, after
// that of a record the record stage left UNKNOWN (st.madeUnknown). It
// never ends the call itself.
func (s *Engine) receipt(st *callState) {
	if s.receipts == nil {
		return
	}
	if st.madeUnknown {
		s.receipts.enqueue(st.call.Tenant, s.callReceipt(st, receipts.EventMadeUnknown))
	}
	res := &st.result
	ran := st.exec.resp != nil || st.exec.err != nil // the tool was called under a claim
	var event receipts.Event
	switch {
	case ran && !res.InputRequired, res.Kind == ResultUnkeyed:
		// Whatever it answered, failures included: the tool ran. An
		// unkeyed call (mcp.allow_unkeyed) ran too, without a record.
		event = receipts.EventExecuted
	case res.Problem != nil && res.Problem.Code == wire.CodeCallDenied:
		event = receipts.EventDenied
	case res.Problem != nil && res.Problem.Code == wire.CodeApprovalExpired:
		event = receipts.EventApprovalExpired
	case res.Problem != nil && res.Problem.Code == wire.CodeEffectConflict:
		event = receipts.EventEffectConflict
	default:
		return // replays, refusals before the store, in progress: no receipt
	}
	r := s.callReceipt(st, event)
	if event == receipts.EventExecuted {
		r.Status = res.Status
		if res.Problem != nil {
			r.Status = res.Problem.Status // the tool failed: the answer the client got
		}
	}
	var ref *idempotency.OutboxRef
	if event == receipts.EventExecuted && ran && st.lease.ExecutionID != "" { // its completion may have written the outbox entry
		ref = &idempotency.OutboxRef{Scope: st.lease.Scope, Step: st.lease.Step, ExecutionID: st.lease.ExecutionID}
	}
	s.receipts.enqueueWith(st.call.Tenant, r, ref)
}

// receiptOfApproval is the receipt stage at each claim: the receipt of
// the pending approval the claim just wrote (st.newApproval), enqueued
// before the call waits for its decision, so it comes before the
// decision's in the chain.
func (s *Engine) receiptOfApproval(st *callState) {
	if s.receipts != nil && st.newApproval != nil {
		s.receipts.enqueue(st.call.Tenant, s.callReceipt(st, receipts.EventApprovalRequested))
	}
}

// callReceipt is the receipt of event for the call: its identity and the
// decision taken on it.
func (s *Engine) callReceipt(st *callState, event receipts.Event) receipts.Receipt {
	name := st.call.Entry.Spec.Name
	r := receipts.Receipt{Event: event, Tool: name, ExecutionID: st.lease.ExecutionID, Requester: st.call.Requester.ID}
	if st.unprotected == 0 && st.id.Key != "" {
		r.Key = receipts.KeyHash(st.id.Key)
	}
	if id := st.identity(); id.HasStep {
		r.Session, r.Step = id.SessionID, strconv.FormatUint(id.StepIndex, 10)
	}
	if v := st.verdict; v != nil {
		r.Decision = string(v.Effective())
		if v.Rule >= 0 {
			r.Rule = "decide[" + strconv.Itoa(v.Rule) + "]"
		}
		if v.Observe {
			r.Observe = string(v.Decision)
		}
		r.Policy = s.settings.Load().decisions[name].Digest()
	}
	return r
}

// receiptForRecord enqueues event for a stored record: an operator's
// action or an approval's decision (by names who).
func (s *Engine) receiptForRecord(event receipts.Event, rec idempotency.Record, by, claimedBy string) {
	if s.receipts == nil {
		return
	}
	r := receipts.Receipt{Event: event, Tool: rec.Scope.Tool, Key: receipts.KeyHash(rec.Scope.Key),
		ExecutionID: rec.ExecutionID, By: by, ClaimedBy: claimedBy}
	if rec.Step != nil {
		r.Session, r.Step = rec.Step.SessionID, strconv.FormatUint(rec.Step.Index, 10)
	}
	if rec.Response != nil {
		r.Status = rec.Response.Status
	}
	if rec.Approval != nil && rec.Approval.Rule >= 0 {
		r.Rule = "decide[" + strconv.Itoa(rec.Approval.Rule) + "]"
		r.Decision = string(decide.Approve)
	}
	if rec.Approval != nil {
		r.Requester = rec.Approval.Requester
	}
	s.receipts.enqueue(rec.Scope.Tenant, r)
}

// byAdmin is [receipts.Receipt.By] of an admin API action: the admin
// token's principal, token:admin, which names no person.
var byAdmin = principal.Admin.ID

// approvalEvent is the event of an approval's decision.
func approvalEvent(approve bool) receipts.Event {
	if approve {
		return receipts.EventApprovalGranted
	}
	return receipts.EventApprovalDenied
}
