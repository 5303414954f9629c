package callpath

import (
	"context"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/tools"
)

// The records gauge, gateway_records{state,tool}: how many records wait in
// the states an operator or an alert must see — UNKNOWN (a human must
// resolve it), IN_PROGRESS (running, or left by a dead replica) and
// AWAITING_APPROVAL (a human must decide it) —
// sampled from the store, so it shows an UNKNOWN record that no client
// retries (a counter of 409 outcome_unknown answers cannot).
//
// An IN_PROGRESS record whose lease ended more than a lease ago belongs to
// a gateway that died holding it. For a lease_expiry: unknown tool it is
// an UNKNOWN in waiting: the next call of its key turns it UNKNOWN, and
// until then nothing else would show it. gateway_records_abandoned counts
// those, so the alert fires without that next call (for a rerun tool the
// next call simply runs it again, as its policy allows: not counted).
//
// Each sample lists each state through the store's admin List with a state
// filter, page by page, and stops after RecordsSamplePages pages: the work
// of one sample is bounded whatever the store holds. A listing cut short
// publishes what it counted (a lower bound) and sets
// gateway_records_truncated{state} to 1; docs/operations.md says what the
// bound means for each store.

// DefaultRecordsSampleInterval is how often the gauge is sampled when
// Options.RecordsSampleInterval is zero.
const DefaultRecordsSampleInterval = 30 * time.Second

// RecordsSamplePages bounds one sample: at most this many List pages of
// idempotency.MaxListLimit records per state.
const RecordsSamplePages = 10

// sampledStates are the states the gauge counts, in label form.
var sampledStates = []idempotency.State{idempotency.StateUnknown, idempotency.StateInProgress, idempotency.StateAwaitingApproval}

// startRecordsSampler samples the gauge now and then every interval until
// the returned stop is called (Drain calls it). Without an admin side in
// the store, or with sampling off (a negative interval), it does nothing.
func (s *Engine) startRecordsSampler(interval time.Duration) (stop func()) {
	if s.admin == nil || interval < 0 {
		return func() {}
	}
	interval = orDefault(interval, DefaultRecordsSampleInterval)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		for {
			// Each sample gets at most one interval, so a store that
			// hangs never stacks samples up.
			sampleCtx, cancelSample := context.WithTimeout(ctx, interval)
			s.sampleRecords(sampleCtx)
			s.sampleBudgets(sampleCtx)
			cancelSample()
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// sampleRecords counts the records of each sampled state by tool and
// publishes the counts; a state whose listing failed keeps its last value.
func (s *Engine) sampleRecords(ctx context.Context) {
	for _, state := range sampledStates {
		counts, abandoned, truncated, err := s.countRecords(ctx, state)
		if err != nil {
			if ctx.Err() == nil {
				s.metrics.storeErrors.WithLabelValues("records_sample").Inc()
				s.log.WarnContext(ctx, "records gauge: the store did not answer the listing; the gauge keeps its last value",
					"state", string(state), "error", err)
			}
			continue
		}
		s.metrics.publishRecords(state, counts, s.gaugeTools(), truncated)
		if state == idempotency.StateInProgress {
			s.metrics.publishAbandoned(abandoned, s.gaugeTools())
		}
	}
}

// countRecords lists the records of state, at most RecordsSamplePages
// pages, and counts them by tool label, and among IN_PROGRESS ones the
// abandoned claims of lease_expiry: unknown tools; truncated reports a
// listing cut short by the bound.
func (s *Engine) countRecords(ctx context.Context, state idempotency.State) (counts, abandoned map[string]float64, truncated bool, err error) {
	counts, abandoned = make(map[string]float64), make(map[string]float64)
	filter := idempotency.ListFilter{State: state, Limit: idempotency.MaxListLimit}
	// A lease ended more than one lock_ttl ago: no renewal for two lock
	// ttls, whatever the clocks of the store and this gateway disagree on.
	deadBefore := time.Now().Add(-s.opts.LockTTL)
	for range RecordsSamplePages {
		page, err := s.admin.List(ctx, filter)
		if err != nil {
			return nil, nil, false, err
		}
		for _, rec := range page.Records {
			label := s.toolLabel(rec.Scope.Tool)
			counts[label]++
			if rec.State == idempotency.StateInProgress && !rec.LeaseExpiresAt.IsZero() && rec.LeaseExpiresAt.Before(deadBefore) &&
				s.policyNamed(rec.Scope.Tool).LeaseExpiry == tools.LeaseExpiryUnknown {
				abandoned[label]++
			}
		}
		if page.Cursor == "" {
			return counts, abandoned, false, nil
		}
		filter.Cursor = page.Cursor
	}
	if ctx.Err() != nil {
		return nil, nil, false, ctx.Err()
	}
	return counts, abandoned, true, nil
}

// toolLabel is the tool label of a record: its tool when the registry
// serves it, else "unknown" (a tool removed from the config still has
// records; label values stay the configured names).
func (s *Engine) toolLabel(tool string) string {
	if _, ok := s.tools.Lookup(tool); ok {
		return tool
	}
	return labelUnknownTool
}

// gaugeTools are the tools whose series exist even at 0, so a dashboard
// shows 0 rather than no data: every tool that keeps records.
func (s *Engine) gaugeTools() []string {
	var names []string
	for _, e := range s.tools.Entries() {
		if !e.Spec.ReadOnly {
			names = append(names, e.Spec.Name)
		}
	}
	return names
}
