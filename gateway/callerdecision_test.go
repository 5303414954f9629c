package gateway_test

import (
	"errors"
	"testing"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/tools"
)

// TestDecideCallerApproval: the adapter's one call to record a caller's
// answer decides only the tenant's own approver: caller approvals, by the
// tenant; another tenant's or an operator's is ErrNotCallersApproval and
// stays pending; an approval already decided is no error and keeps its
// first decision.
func TestDecideCallerApproval(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		h := newHarness(t, kind, []tools.Tool{newTestTool("refund")})
		mine := requestApproval(t, h.store, "acme", "refund", "s1", 1, `{"amount":2000}`, idempotency.ApproverCaller)
		operators := requestApproval(t, h.store, "acme", "refund", "s1", 2, `{"amount":3000}`, idempotency.ApproverOperator)
		theirs := requestApproval(t, h.store, "globex", "refund", "s1", 1, `{"amount":2000}`, idempotency.ApproverCaller)

		for _, a := range []pendingApproval{operators, theirs} {
			if err := h.gw.DecideCallerApproval(t.Context(), "acme", a.id, true, "via MCP elicitation"); !errors.Is(err, callpath.ErrNotCallersApproval) {
				t.Fatalf("%s/%d: %v, want ErrNotCallersApproval", a.tenant, a.step, err)
			}
			if rec := storedApproval(t, h.store, a.id); rec.State != idempotency.StateAwaitingApproval {
				t.Fatalf("a refused decision changed %s/%d: %s", a.tenant, a.step, rec.State)
			}
		}
		if err := h.gw.DecideCallerApproval(t.Context(), "acme", mine.id, false, "via MCP elicitation"); err != nil {
			t.Fatal(err)
		}
		if err := h.gw.DecideCallerApproval(t.Context(), "acme", mine.id, true, "again"); err != nil {
			t.Fatalf("deciding a decided approval: %v, want no error", err)
		}
		rec := storedApproval(t, h.store, mine.id)
		if rec.State != idempotency.StateDenied || rec.Approval.DecidedBy != "token:acme" || rec.Approval.Note != "via MCP elicitation" {
			t.Fatalf("the store says %s by %q note %q, want DENIED by acme via MCP elicitation", rec.State, rec.Approval.DecidedBy, rec.Approval.Note)
		}
	})
}
