package reconcile

import (
	"context"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// Scan bounds: a scan reads at most scanPages pages of scanPageSize
// records per state and tool, so one tick's work stays bounded however
// many records wait (the rest are seen on later ticks, as earlier ones
// end).
const (
	scanPageSize = 100
	scanPages    = 10
)

// maxBackoffFactor caps the wait between two questions at this many
// times the tool's every.
const maxBackoffFactor = 8

// scan lists t's UNKNOWN records (and abandoned IN_PROGRESS ones when
// t.Abandoned) and reconciles those that are due.
func (w *Worker) scan(ctx context.Context, t Target) {
	states := []idempotency.State{idempotency.StateUnknown}
	if t.Abandoned {
		states = append(states, idempotency.StateInProgress)
	}
	gaveUp := 0
	for _, state := range states {
		cursor := ""
		for page := 0; page < scanPages; page++ {
			if ctx.Err() != nil {
				return
			}
			p, err := w.store.List(ctx, idempotency.ListFilter{State: state, Tool: t.Tool, Limit: scanPageSize, Cursor: cursor})
			if err != nil {
				w.log.Warn("reconcile: listing records failed", "tool", t.Tool, "state", string(state), "error", err)
				return
			}
			for _, rec := range p.Records {
				switch w.due(t, rec) {
				case dueNow:
					w.reconcile(ctx, t, rec.Scope)
				case dueNever:
					gaveUp++
				}
			}
			if cursor = p.Cursor; cursor == "" {
				break
			}
		}
	}
	w.metrics.gaveUp.WithLabelValues(t.Tool).Set(float64(gaveUp))
}

type dueness int

const (
	dueLater dueness = iota
	dueNow
	dueNever // its attempts are used up
)

// due says whether rec is to be asked about now.
func (w *Worker) due(t Target, rec idempotency.Record) dueness {
	now := w.now()
	if rec.State == idempotency.StateInProgress && now.Before(rec.LeaseExpiresAt.Add(t.AbandonedAfter)) {
		return dueLater // alive, or its owner may still land its outcome
	}
	rc := rec.Reconciliation
	if rc == nil || rc.Count == 0 {
		// First question: give the call's own outcome a moment to land
		// (a store that answers again, an in-flight completion).
		if now.Before(rec.CreatedAt.Add(t.Every)) {
			return dueLater
		}
		return dueNow
	}
	if rc.Count >= t.Attempts {
		return dueNever
	}
	if rc.Owner != "" && rc.Owner != w.owner && now.Before(rc.LeaseUntil) {
		return dueLater // another replica is asking
	}
	if len(rc.Attempts) > 0 && now.Before(rc.Attempts[len(rc.Attempts)-1].At.Add(backoff(t.Every, rc.Count))) {
		return dueLater
	}
	return dueNow
}

// backoff is the wait after the count-th question: every, doubling, at
// most maxBackoffFactor × every.
func backoff(every time.Duration, count int) time.Duration {
	wait := every
	for i := 1; i < count && wait < maxBackoffFactor*every; i++ {
		wait *= 2
	}
	return min(wait, maxBackoffFactor*every)
}
