package callpath

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/receipts"
)

// The receipt writer: the receipt stage (receipt.go, which tells the
// whole story) only enqueues; one writer goroutine per Engine appends
// with retries, in batches, and expires old receipts.

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
