package gateway_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/decide"
	"github.com/toolgateway/toolgateway/gateway/gatewaytest"
	"github.com/toolgateway/toolgateway/gateway/principal"
	"github.com/toolgateway/toolgateway/wire"
)

// TestDecisionByAnUnknownPrincipalIs403: the rule lists its approvers;
// a decision by anyone else — the admin token over the admin API, a
// person the list does not name, a decider with no principal at all — is
// 403 not_an_approver, both approve and deny, and changes nothing: the
// call stays pending and never runs. The listed person's approve runs it
// once.
func TestDecisionByAnUnknownPrincipalIs403(t *testing.T) {
	ctx := context.Background()
	ada := person(t, "ada", "finance")
	h, tool := trustHarness(t, []decide.Rule{{Decision: decide.Approve, Approvers: decide.Approvers{IDs: []string{ada.ID}}}})
	c := acmeRefund("unknown", 1, "900")
	id := pendingID(t, h.Do(c))

	for _, action := range []string{"approve", "deny"} {
		r := postAdmin(t, h, "/admin/v1/approvals/"+id+"/"+action, `{"by":"ada","note":"I am ada"}`)
		gatewaytest.WantProblem(t, r, http.StatusForbidden, wire.CodeNotAnApprover)
	}
	for _, d := range []principal.Principal{person(t, "eve", "finance"), {}} {
		if _, err := h.GW.DecideApproval(ctx, id, callpath.ApprovalDecision{Approve: true, Decider: d}); refusedCode(err) != wire.CodeNotAnApprover {
			t.Fatalf("approve by %q: %v, want not_an_approver", d.ID, err)
		}
	}
	got := gatewaytest.MustJSON(t, h.Send(http.MethodGet, "/admin/v1/approvals/"+id, adminToken).Body)
	if by, _ := got["approved_by"].([]any); got["state"] != "PENDING" || len(by) != 0 || got["decided_by"] != nil {
		t.Fatalf("after refused decisions the approval is %v", got)
	}
	gatewaytest.WantProblem(t, h.Do(c), http.StatusConflict, wire.CodeApprovalPending)
	if n := tool.Total.Load(); n != 0 {
		t.Fatalf("refused decisions let the call run %d times", n)
	}

	if _, err := h.GW.DecideApproval(ctx, id, callpath.ApprovalDecision{Approve: true, Decider: ada}); err != nil {
		t.Fatal(err)
	}
	if r := h.Do(c); r.Status != http.StatusOK || tool.Runs(keyOf(t, c)) != 1 {
		t.Fatalf("approved by the listed person: %d, ran %d", r.Status, tool.Runs(keyOf(t, c)))
	}
}
