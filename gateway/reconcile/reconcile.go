// Package reconcile resolves uncertain outcomes by asking the tool's
// owner: an UNKNOWN record, or an abandoned IN_PROGRESS one of a
// lease_expiry: unknown tool, of a tool configured with reconcile:, is
// completed with the outcome the owner confirms (resolved_by "reconcile"),
// or removed when the owner says it did not commit, so the next call runs.
// Any other answer leaves the record UNKNOWN and is asked again, with
// backoff, up to the tool's attempts; then only an operator resolves it.
//
// The [Worker] finds the records through the store's admin listing and
// takes a per-record reconcile lease in the store ([idempotency.Reconciler])
// before it asks, so one replica at a time reconciles a record. It depends
// on the store and the tools, never on the gateway's call path.
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// Target is one tool with reconciliation.
type Target struct {
	// Tool is the tool's gateway name.
	Tool string
	// Ask asks the tool's owner.
	Ask Asker
	// Every is the wait before the first question and the base of the
	// backoff between later ones (doubling, at most maxBackoffFactor × Every).
	Every time.Duration
	// Attempts is how many questions a record gets before an operator
	// must resolve it.
	Attempts int
	// Timeout bounds one question (the tool's timeout).
	Timeout time.Duration
	// MaxResponseBytes bounds a committed answer's body (the tool's
	// max_response_bytes).
	MaxResponseBytes int64
	// ReplayTTL is how long a reconciled outcome is replayed.
	ReplayTTL time.Duration
	// Abandoned says the tool is lease_expiry: unknown, so an IN_PROGRESS
	// record whose lease expired (its gateway died) is reconciled too,
	// once AbandonedAfter (the gateway's lock_ttl) more has passed: the
	// owner of a lease that ran out during a store outage may still be
	// landing its outcome (as gateway_records_abandoned counts them).
	Abandoned      bool
	AbandonedAfter time.Duration
}

// Validate checks t, naming the field at fault.
func (t Target) Validate() error {
	switch {
	case t.Tool == "" || t.Ask == nil:
		return errors.New("a tool and an asker are required")
	case t.Every <= 0:
		return fmt.Errorf("every %v must be positive", t.Every)
	case t.Attempts < 1:
		return fmt.Errorf("attempts %d must be at least 1", t.Attempts)
	case t.Timeout <= 0 || t.MaxResponseBytes <= 0 || t.ReplayTTL <= 0:
		return errors.New("timeout, max response bytes and replay ttl must be positive")
	}
	return nil
}

// Store is what the worker needs of the idempotency store.
type Store interface {
	idempotency.Admin
	idempotency.Reconciler
}

// Options configure a [Worker].
type Options struct {
	Store   Store
	Targets []Target
	// Owner names this replica in the reconcile leases it takes; unique
	// per process.
	Owner string
	// Registerer receives gateway_reconcile_*; nil registers nothing.
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// OnResolved, when set, hears of every record the worker resolved:
	// completed with the owner's answer (status) or removed as not
	// committed (status 0), with the budget reservations that settled
	// (committed or released with it). The gateway leaves its receipts.
	OnResolved func(rec idempotency.Record, status int, settled []idempotency.Reservation)
}

// Worker reconciles the records of its targets until its context ends.
type Worker struct {
	store   Store
	targets []Target
	owner   string
	log     *slog.Logger
	now     func() time.Time
	metrics *metrics
	// resolved is Options.OnResolved; nil: nobody listens (receipts off),
	// and a resolution reads nothing for it.
	resolved func(rec idempotency.Record, status int, settled []idempotency.Reservation)
}

// New checks opts and returns the worker.
func New(opts Options) (*Worker, error) {
	if opts.Store == nil || opts.Owner == "" {
		return nil, errors.New("reconcile: a store and an owner are required")
	}
	for _, t := range opts.Targets {
		if err := t.Validate(); err != nil {
			return nil, fmt.Errorf("reconcile: tool %q: %w", t.Tool, err)
		}
	}
	m, err := newMetrics(opts.Registerer, opts.Targets)
	if err != nil {
		return nil, fmt.Errorf("reconcile: metrics: %w", err)
	}
	w := &Worker{store: opts.Store, targets: opts.Targets, owner: opts.Owner, log: opts.Logger, now: opts.Now, metrics: m,
		resolved: opts.OnResolved}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	if w.now == nil {
		w.now = time.Now
	}
	return w, nil
}

// Run scans the targets' records every tick until ctx ends; a question in
// flight is cancelled then and its record stays UNKNOWN (its reconcile
// lease runs out, and another replica may ask).
func (w *Worker) Run(ctx context.Context) {
	if len(w.targets) == 0 {
		return
	}
	ticker := time.NewTicker(w.tick())
	defer ticker.Stop()
	for {
		for _, t := range w.targets {
			w.scan(ctx, t)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// tick is how often the records are scanned: half the shortest every, so
// a record is asked at most half an every late.
func (w *Worker) tick() time.Duration {
	tick := w.targets[0].Every
	for _, t := range w.targets[1:] {
		tick = min(tick, t.Every)
	}
	return max(tick/2, minTick)
}

// minTick keeps a tiny every from spinning the scan.
const minTick = 20 * time.Millisecond
