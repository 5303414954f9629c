package gateway

import (
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// AdminReconciliation is what an admin record shows of its
// reconciliation: how often the tool's owner was asked and the latest
// answers (docs/operations.md).
type AdminReconciliation struct {
	// Attempts counts the questions asked so far.
	Attempts int `json:"attempts"`
	// Answers are the latest attempts, oldest first.
	Answers []AdminReconcileAnswer `json:"answers"`
}

// AdminReconcileAnswer is one attempt of an [AdminReconciliation].
type AdminReconcileAnswer struct {
	At      string `json:"at"`
	Outcome string `json:"outcome"`
	Detail  string `json:"detail,omitempty"`
}

// toAdminReconciliation converts rc (nil: none).
func toAdminReconciliation(rc *idempotency.Reconciliation) *AdminReconciliation {
	if rc == nil || rc.Count == 0 {
		return nil
	}
	out := &AdminReconciliation{Attempts: rc.Count, Answers: make([]AdminReconcileAnswer, 0, len(rc.Attempts))}
	for _, a := range rc.Attempts {
		out.Answers = append(out.Answers, AdminReconcileAnswer{At: a.At.UTC().Format(time.RFC3339Nano), Outcome: a.Outcome, Detail: a.Detail})
	}
	return out
}
