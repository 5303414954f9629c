package reconcile

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/tools"
)

// leaseMargin is added to the tool's timeout for the reconcile lease: the
// question, then the store writes, fit in it; a replica killed meanwhile
// leaves the record to another after it.
const leaseMargin = 5 * time.Second

// storeWriteTimeout bounds a store write after the question, detached
// from the worker's context so an answer received during shutdown is
// still kept.
const storeWriteTimeout = 5 * time.Second

// maxDetail bounds the detail kept with an attempt.
const maxDetail = 200

// reconcile asks about the record under scope once, if this replica gets
// its reconcile lease, and acts on the answer.
func (w *Worker) reconcile(ctx context.Context, t Target, scope idempotency.Scope) {
	rec, err := w.store.ClaimReconcile(ctx, scope, w.owner, t.Timeout+leaseMargin)
	switch {
	case errors.Is(err, idempotency.ErrReconcileHeld), errors.Is(err, idempotency.ErrNotFound), errors.Is(err, idempotency.ErrNotResolvable):
		return // another replica asks, or the record moved on
	case err != nil:
		w.log.Warn("reconcile: claiming the record failed", "record", scope.String(), "error", err)
		return
	}
	// The listing may be older than the record (or a store may list
	// records without their reconciliation): decide again on the record
	// as claimed. A record not due keeps the lease until it runs out.
	if w.due(t, rec) != dueNow {
		return
	}
	q := Question{
		Tool:         scope.Tool,
		UpstreamKey:  tools.ScopedKey(scope.Tenant, scope.Tool, scope.Key),
		FencingToken: rec.FencingToken,
		ExecutionID:  rec.ExecutionID,
		Arguments:    rec.CanonicalArguments,
	}
	askCtx, cancel := context.WithTimeout(ctx, t.Timeout)
	answer, askErr := t.Ask.Ask(askCtx, q, t.MaxResponseBytes)
	cancel()
	if ctx.Err() != nil {
		return // shutting down: not an answer; the lease runs out
	}
	outcome, detail := classify(answer, askErr)
	w.metrics.attempts.WithLabelValues(t.Tool, outcome).Inc()
	writeCtx, cancelWrite := context.WithTimeout(context.WithoutCancel(ctx), storeWriteTimeout)
	defer cancelWrite()
	w.act(writeCtx, t, rec, outcome, detail, answer)
}

// classify names an attempt's outcome and a short detail.
func classify(answer Answer, err error) (outcome, detail string) {
	switch {
	case errors.Is(err, errInvalidAnswer):
		return OutcomeInvalid, truncate(err.Error())
	case err != nil:
		return OutcomeError, truncate(err.Error())
	}
	return answer.Outcome, ""
}

// act records the attempt and applies the answer.
func (w *Worker) act(ctx context.Context, t Target, rec idempotency.Record, outcome, detail string, answer Answer) {
	scope, token := rec.Scope, rec.FencingToken
	log := w.log.With("tool", t.Tool, "record", scope.String(), "execution_id", rec.ExecutionID, "outcome", outcome)
	if outcome == OutcomeNotCommitted {
		settled, ok := w.reservations(ctx, scope, log)
		if !ok {
			return
		}
		// The record goes: nothing of it, attempts included, is kept.
		switch err := w.store.DropReconciled(ctx, scope, w.owner, token); {
		case errors.Is(err, idempotency.ErrLeaseLost):
			log.Info("reconcile: not_committed ignored: the record is no longer UNKNOWN under this reconciliation (an operator resolved or deleted it)")
		case err != nil:
			log.Warn("reconcile: removing the record failed; it stays UNKNOWN", "error", err)
		default:
			log.Info("reconcile: the upstream did not commit: record removed, the next call runs the tool")
			w.heard(rec, 0, settled)
		}
		return
	}
	attempt := idempotency.ReconcileAttempt{At: w.now(), Outcome: outcome, Detail: detail}
	kept, err := w.store.RecordReconcileAttempt(ctx, scope, w.owner, token, attempt)
	if err != nil {
		log.Warn("reconcile: keeping the attempt failed", "error", err)
		if errors.Is(err, idempotency.ErrLeaseLost) {
			return
		}
	}
	if outcome != OutcomeCommitted {
		count := 0
		if kept.Reconciliation != nil {
			count = kept.Reconciliation.Count
		}
		if count >= t.Attempts {
			log.Warn("reconcile: attempts used up: the record waits for an operator", "attempts", count, "detail", detail)
			return
		}
		log.Info("reconcile: outcome still uncertain; asking again later", "attempts", count, "detail", detail)
		return
	}
	settled, ok := w.reservations(ctx, scope, log)
	if !ok {
		return
	}
	resp := idempotency.StoredResponse{Status: answer.Status, ContentType: "application/json", Body: answer.Body}
	switch _, err := w.store.CompleteReconciled(ctx, scope, w.owner, token, resp, t.ReplayTTL); {
	case errors.Is(err, idempotency.ErrLeaseLost):
		log.Info("reconcile: committed answer ignored: the record is no longer UNKNOWN under this reconciliation (an operator resolved or deleted it)")
	case err != nil:
		log.Warn("reconcile: completing the record failed; it stays UNKNOWN", "error", err)
	default:
		log.Info("reconcile: the upstream committed: record completed", "status", answer.Status)
		w.heard(rec, answer.Status, settled)
	}
}

// reservations reads the budget reservations the record holds, which
// its completion commits or its drop releases, for OnResolved: read
// under the reconcile lease, while the record stays UNKNOWN in the same
// life. None on a store that keeps no budgets, and none read when no
// OnResolved listens. A failed read is logged and answers not ok: the
// caller leaves the record UNKNOWN rather than settle it unreceipted.
func (w *Worker) reservations(ctx context.Context, scope idempotency.Scope, log *slog.Logger) (settled []idempotency.Reservation, ok bool) {
	keeper, keeps := w.store.(idempotency.BudgetKeeper)
	if w.resolved == nil || !keeps || !keeper.KeepsBudgets() {
		return nil, true
	}
	settled, err := keeper.Reservations(ctx, scope)
	if err != nil {
		log.Warn("reconcile: reading the record's budget reservations failed; it stays UNKNOWN", "error", err)
		return nil, false
	}
	return settled, true
}

// heard tells OnResolved, when set, of a record the worker resolved.
func (w *Worker) heard(rec idempotency.Record, status int, settled []idempotency.Reservation) {
	if w.resolved != nil {
		w.resolved(rec, status, settled)
	}
}

func truncate(s string) string {
	if len(s) > maxDetail {
		return s[:maxDetail] + "…"
	}
	return s
}
