package mcpserver_test

import (
	"context"
	"strings"
	"testing"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/decide"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// The decide stage's answers over MCP are tool results with isError the
// model reads: a deny says why, a pending approval says to call again
// later and carries the approval in structuredContent; once approved, the
// same call runs.
func TestDecisionsRenderAsToolResults(t *testing.T) {
	p, err := decide.Compile("wire", []decide.Rule{
		{When: "args.amount <= 100", Decision: decide.Allow},
		{When: "args.amount <= 1000", Decision: decide.Approve, Approver: decide.Caller, Reason: "needs a human"},
		{Decision: decide.Deny, Reason: "too much money"},
	})
	if err != nil {
		t.Fatal(err)
	}
	tool := newTestTool("wire")
	h := newHarness(t, storeEmbedded, []tools.Tool{tool}, func(o *callpath.Options) {
		o.Decisions = map[string]*decide.Policy{"wire": p}
	})
	cs := h.MCPSession(mcpClientOptions{})

	res, err := mcpCall(t, cs, "wire", `{"amount":5000}`, identityMeta("m", 1))
	if err != nil || !res.IsError {
		t.Fatalf("denied call: %v %+v", err, res)
	}
	wantErrorMeta(t, res, wire.CodeCallDenied, false)
	if text := resultText(t, res); !strings.Contains(text, "denied") || !strings.Contains(text, "too much money") {
		t.Fatalf("deny text: %q", text)
	}

	// approver: caller behaves as operator for a client without elicitation.
	res, err = mcpCall(t, cs, "wire", `{"amount":500}`, identityMeta("m", 2))
	if err != nil || !res.IsError {
		t.Fatalf("pending call: %v %+v", err, res)
	}
	wantErrorMeta(t, res, wire.CodeApprovalPending, true)
	if text := resultText(t, res); !strings.Contains(text, "approval") || !strings.Contains(text, "same call again") {
		t.Fatalf("pending text: %q", text)
	}
	sc, _ := resultJSON(t, res)["structuredContent"].(map[string]any)
	id, _ := sc["approval_id"].(string)
	if len(id) != 26 || sc["approval_expires_at"] == nil {
		t.Fatalf("structuredContent: %v", sc)
	}
	if tool.Total.Load() != 0 {
		t.Fatal("a denied or pending call ran")
	}
	if _, err := h.Store.(idempotency.Approvals).DecideApproval(context.Background(), id, idempotency.ApprovalDecision{Approve: true, By: "ops"}); err != nil {
		t.Fatal(err)
	}
	res, err = mcpCall(t, cs, "wire", `{"amount":500}`, identityMeta("m", 2))
	wantExecuted(t, res, err, false)
	if tool.Total.Load() != 1 {
		t.Fatalf("approved call ran %d times, want 1", tool.Total.Load())
	}
}
