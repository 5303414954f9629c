package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/wire"
)

// approver: caller over MCP. A call whose approval the caller's own human
// decides is answered, to a client of protocol 2026-07-28 or later that
// declared elicitation, with an input request (SEP-2322) of kind
// elicitation: a yes/no showing the tool and its canonical arguments,
// and a requestState naming the approval. The client's continuation (the
// same call with inputResponses and that requestState) is the same call
// again, so it finds the same pending approval; the answer is recorded as
// its decision (by the tenant) and the call goes on as any call: approved,
// it runs; declined, approval_denied; cancelled, it stays pending.
//
// Older clients cannot be asked: the endpoint is stateless, and go-sdk's
// stateless server refuses every server-to-client request, elicitation/create
// included. They get the operator's answer (a pending tool result).

// approvalStatePrefix starts the requestState of an approval's input
// request; the approval id follows. An upstream's own state never reaches
// the client before the call ran, so a continuation of a pending call
// carries only the gateway's.
const approvalStatePrefix = "io.github.toolgateway/approval:"

// approvalInputID names the elicitation among the input requests.
const approvalInputID = "approve"

// approvalNote is the note of a decision taken through elicitation.
const approvalNote = "via MCP elicitation"

// approvalSchema is the elicitation's form: one required yes/no.
var approvalSchema = json.RawMessage(`{"type":"object","properties":{"approve":{"type":"boolean","title":"Approve","description":"Let this tool call run once with exactly these arguments"}},"required":["approve"]}`)

// callerCanBeAsked reports whether the client can answer an elicitation
// input request: it accepts input requests and declared form
// elicitation in its capabilities (_meta, protocol 2026-07-28).
func callerCanBeAsked(mrt callpath.MultiRoundTrip, meta map[string]json.RawMessage) bool {
	if !mrt.AcceptsInputRequests {
		return false
	}
	var capabilities struct {
		Elicitation *struct {
			Form json.RawMessage `json:"form"`
			URL  json.RawMessage `json:"url"`
		} `json:"elicitation"`
	}
	if json.Unmarshal(meta[metaClientCapabilities], &capabilities) != nil || capabilities.Elicitation == nil {
		return false
	}
	// An empty elicitation capability means form; url alone does not.
	return capabilities.Elicitation.Form != nil || capabilities.Elicitation.URL == nil
}

// approvalInputRequired is the input_required result that asks the
// caller's human about q.
func approvalInputRequired(q *callpath.CallerApproval) *mcp.CallToolResult {
	var msg strings.Builder
	msg.WriteString("Allow this tool call to run once?\n\nTool: ")
	msg.WriteString(q.Tool)
	msg.WriteString("\nArguments: ")
	msg.WriteString(q.CanonicalArguments)
	if q.Reason != "" {
		msg.WriteString("\nWhy it needs your approval: ")
		msg.WriteString(q.Reason)
	}
	return &mcp.CallToolResult{
		Content: []mcp.Content{},
		InputRequests: mcp.InputRequestMap{approvalInputID: &mcp.ElicitParams{
			Mode: "form", Message: msg.String(), RequestedSchema: approvalSchema,
		}},
		RequestState: approvalStatePrefix + q.ID,
	}
}

// approvalContinuation returns the approval id a continuation answers,
// when its requestState is the gateway's.
func approvalContinuation(mrt callpath.MultiRoundTrip) (string, bool) {
	if mrt.Continuation == nil {
		return "", false
	}
	id, ok := strings.CutPrefix(mrt.Continuation.RequestState, approvalStatePrefix)
	if !ok || id == "" {
		return "", false
	}
	return id, true
}

// elicitedDecision reads the human's answer from the inputResponses:
// accept with approve true approves, accept with approve false or
// decline denies; cancel, or no answer, decides nothing.
func elicitedDecision(inputResponses json.RawMessage) (approve, decided bool) {
	var responses map[string]struct {
		Action  string         `json:"action"`
		Content map[string]any `json:"content"`
	}
	if json.Unmarshal(inputResponses, &responses) != nil {
		return false, false
	}
	answer, ok := responses[approvalInputID]
	if !ok {
		return false, false
	}
	switch answer.Action {
	case "accept":
		yes, _ := answer.Content["approve"].(bool)
		return yes, true
	case "decline":
		return false, true
	}
	return false, false
}

// callerDecides runs a continuation that answers approval id: the call
// again (the continuation is the gateway's, not an upstream's), and, when
// it is still that pending approval, the answer recorded and the call made
// once more, to run it or say it was denied.
func (e *endpoint) callerDecides(ctx context.Context, c *callpath.Call, id string) (*mcp.CallToolResult, error) {
	answer := c.MultiRoundTrip.Continuation.InputResponses
	c.MultiRoundTrip.Continuation = nil
	res := e.gw.Call(ctx, c)
	if p := res.Problem; p == nil || p.Caller == nil || p.Caller.ID != id {
		return e.render(c, res) // decided meanwhile, or not this call's approval
	}
	approve, decided := elicitedDecision(answer)
	if !decided {
		return e.render(c, res) // cancelled: it stays pending
	}
	if err := e.gw.DecideCallerApproval(ctx, c.Tenant, id, approve, approvalNote); err != nil {
		var refused *callpath.DecisionRefused
		if errors.As(err, &refused) { // not an approver: the rule's approvers decide
			return mcpRender(c, callpath.Result{Kind: callpath.ResultProblem, Problem: refused.Problem})
		}
		e.gw.Logger().ErrorContext(ctx, "recording the caller's approval failed", "tool", c.Entry.Spec.Name, "approval_id", id, "error", err)
		p := callpath.NewProblem(wire.CodeStoreUnavailable, "the gateway could not record the decision; nothing ran. Make the same call again").WithRetryAfter(1)
		return e.render(c, callpath.Result{Kind: callpath.ResultProblem, Problem: p})
	}
	return e.render(c, e.gw.Call(ctx, c))
}
