package chaos

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// reconcileEvery and reconcileAttempts are the unknown tool's reconcile:
// section with Config.Reconcile: quick, so the run's UNKNOWN records are
// resolved within it, and attempts enough to outlast store restarts.
const (
	reconcileEvery    = 200 * time.Millisecond
	reconcileAttempts = 100
)

// reconcilePath is the upstream's reconcile endpoint: it knows the truth.
const reconcilePath = "/reconcile"

// reconcileSection is the unknown tool's reconcile: section.
func (u *upstream) reconcileSection() map[string]any {
	return map[string]any{
		"http":     map[string]any{"url": u.server.URL + reconcilePath},
		"every":    reconcileEvery.String(),
		"attempts": reconcileAttempts,
	}
}

// serveReconcile answers the gateway's question about one call from what
// this upstream ran: committed, with the body the call would have got,
// when an execution of that execution id reached it (it acts on arrival);
// not_committed otherwise, and from then on it refuses every request of
// that key with a fencing token up to the question's (so the old attempt
// can never commit later, as the contract asks of the owner).
func (u *upstream) serveReconcile(w http.ResponseWriter, r *http.Request) {
	var q struct {
		Tool         string `json:"tool"`
		UpstreamKey  string `json:"upstream_key"`
		FencingToken int64  `json:"fencing_token"`
		ExecutionID  string `json:"execution_id"`
	}
	if err := json.NewDecoder(r.Body).Decode(&q); err != nil || q.UpstreamKey == "" {
		http.Error(w, "bad question", http.StatusBadRequest)
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	for i, e := range u.byKey[q.UpstreamKey] {
		if e.ExecutionID != q.ExecutionID {
			continue
		}
		u.reconciledCommitted++
		body, _ := json.Marshal(map[string]any{"outcome": "committed", "status": http.StatusOK,
			"body": answerBody(e, i+1)})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
		return
	}
	u.reconciledNotCommitted++
	u.refusedUpTo[q.UpstreamKey] = max(u.refusedUpTo[q.UpstreamKey], q.FencingToken)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"outcome":"not_committed"}`))
}

// refused reports whether a request of key with fence comes from an
// attempt this upstream promised, answering not_committed, never to run.
// Called with u.mu held.
func (u *upstream) refused(key string, fence int64) bool {
	limit, ok := u.refusedUpTo[key]
	return ok && fence <= limit
}

// answerBody is what the upstream answers for execution e, run n of its key.
func answerBody(e *execution, n int) map[string]any {
	return map[string]any{"tool": e.Tool, "key": e.Key, "run": n, "execution_id": e.ExecutionID, "replica": e.Replica}
}

// isReconcile reports whether r asks the reconcile endpoint.
func isReconcile(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, reconcilePath) }

// checkReconciled: with reconciliation, no step may end outcome_unknown
// (every UNKNOWN record was resolved by its owner's answer, and the agents
// waited for it); the endpoint's answers go into the report.
func checkReconciled(r *Report, u *upstream) {
	u.mu.Lock()
	r.ReconciledCommitted, r.ReconciledNotCommitted = u.reconciledCommitted, u.reconciledNotCommitted
	u.mu.Unlock()
	if r.UnknownOutcomes > 0 {
		r.violate("%s: %d steps ended outcome_unknown although reconciliation was configured", tagReconciled, r.UnknownOutcomes)
	}
}

// tagReconciled names the reconciliation invariant in violations.
const tagReconciled = "reconciled"
