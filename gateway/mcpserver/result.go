package mcpserver

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// How the MCP endpoint renders the call path's answers. Everything here is
// a pure function of a stored outcome or a problem, so a replay renders
// exactly as the first answer did, but for _meta "replayed".

// rpcError turns a problem about the request into the contract's JSON-RPC
// error: the code from the code table, data = the problem's code,
// retryable and extra members (tool and execution_id of step_conflict,
// errors of invalid_arguments, ...), plus retry_after_ms where REST would
// send Retry-After. The message repeats at most maxEcho bytes of the
// request.
func rpcError(p *callpath.Problem) *jsonrpc.Error {
	code, toolResult := rpcCode(p.Code)
	if toolResult {
		code = wire.RPCInvalidParams // only invalid_arguments gets here: not an object
	}
	message := p.Detail
	if message == "" {
		message = p.Title
	}
	return &jsonrpc.Error{Code: code, Message: truncateEcho(message), Data: problemData(p)}
}

// problemData is the problem document without what only HTTP needs (type,
// title, status, detail), so data carries exactly the members a REST
// client would act on.
func problemData(p *callpath.Problem) json.RawMessage {
	body, err := json.Marshal(p)
	if err != nil {
		return json.RawMessage(`{"code":"` + p.Code + `","retryable":false}`)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(body, &members); err != nil {
		return json.RawMessage(`{"code":"` + p.Code + `","retryable":false}`)
	}
	for _, httpOnly := range []string{"type", "title", "status", "detail"} {
		delete(members, httpOnly)
	}
	capEchoes(members, p)
	if p.RetryAfter > 0 {
		members["retry_after_ms"] = json.RawMessage(strconv.Itoa(p.RetryAfter * 1000))
	}
	// Map keys marshal sorted: the same problem gives the same bytes.
	data, err := json.Marshal(members)
	if err != nil {
		return json.RawMessage(`{"code":"` + p.Code + `","retryable":false}`)
	}
	return data
}

// capEchoes cuts what data repeats of the request to maxEcho bytes a
// member (contract section 9: an error never echoes more than 256 bytes
// of the request): the canonical arguments of idempotency_key_mismatch and
// the locations and messages of schema violations, which may quote names
// and values of the arguments. REST's problem body keeps them whole.
func capEchoes(members map[string]json.RawMessage, p *callpath.Problem) {
	if len(p.CanonicalArguments) > maxEcho {
		members["canonical_arguments"], _ = json.Marshal(truncateEcho(p.CanonicalArguments))
	}
	if len(p.Errors) > 0 {
		capped := make([]wire.Violation, len(p.Errors))
		for i, v := range p.Errors {
			capped[i] = wire.Violation{Location: truncateEcho(v.Location), Message: truncateEcho(v.Message)}
		}
		members["errors"], _ = json.Marshal(capped)
	}
}

// isMCPToolFailure reports whether a problem is about the tool's run rather
// than the request (the tool results of rpcCodes): the contract renders
// those as tool results with isError, which the model sees and may act on,
// not as protocol errors.
func isMCPToolFailure(code string) bool {
	_, toolResult := rpcCode(code)
	return code != wire.CodeInvalidArguments && toolResult
}

// mcpErrorMeta is _meta["io.github.toolgateway/error"] of a failed call.
type mcpErrorMeta struct {
	Code      string `json:"code"`
	Retryable bool   `json:"retryable"`
}

// mcpFailure is a tool result with isError for an outcome that was not
// recorded (a tool failure, a timeout, an unreachable upstream) or for
// arguments the schema refuses: text for the model, the code for the
// runtime.
func mcpFailure(code string, retryable bool, text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		Content: []mcp.Content{&mcp.TextContent{Text: text}},
		IsError: true,
		Meta:    mcp.Meta{wire.MetaError: mcpErrorMeta{Code: code, Retryable: retryable}},
	}
}

// mcpProblemFailure renders a tool-failure problem as a tool result; the
// decide stage's refusals and a pending approval get a text of their own
// (mcpDecisionText), which the model reads.
func mcpProblemFailure(p *callpath.Problem) *mcp.CallToolResult {
	text, ok := mcpDecisionText(p)
	if !ok {
		return mcpFailure(p.Code, p.Retryable, p.Detail)
	}
	res := mcpFailure(p.Code, p.Retryable, text)
	if p.ApprovalID != "" {
		res.StructuredContent = approvalContent{ApprovalID: p.ApprovalID, ApprovalExpiresAt: p.ApprovalExpiresAt, Reason: p.Reason, By: p.By}
	}
	return res
}

// approvalContent is the structuredContent of a result about an approval.
type approvalContent struct {
	ApprovalID        string `json:"approval_id"`
	ApprovalExpiresAt string `json:"approval_expires_at"`
	Reason            string `json:"reason,omitempty"`
	By                string `json:"by,omitempty"`
}

// mcpDecisionText is what the model reads when the tool's decide rules or
// an approver stopped the call; ok is false for other problems.
func mcpDecisionText(p *callpath.Problem) (text string, ok bool) {
	because := ""
	if p.Reason != "" {
		because = " Reason: " + p.Reason + "."
	}
	switch p.Code {
	case wire.CodeCallDenied:
		return "This call was denied by the gateway's rules for this tool and did not run." + because +
			" Do not repeat it; tell the user, or do something else.", true
	case wire.CodeApprovalPending:
		return "This call waits for a human's approval and has not run yet (approval " + p.ApprovalID + ", expires " + p.ApprovalExpiresAt +
			"). Make the same call again, with the same arguments, later: once it is approved it runs then.", true
	case wire.CodeApprovalDenied:
		return "A human denied this call; it did not run and will not." + because + " Do not repeat it.", true
	case wire.CodeApprovalExpired:
		return "The approval this call needed expired (approval " + p.ApprovalID + "); it did not run and will not. Do not repeat it unchanged.", true
	}
	return "", false
}

// mcpSchemaFailure renders schema violations as a tool result, one line
// per violation, so the model can correct its arguments. Nothing was
// stored, so the corrected call is a new call.
func mcpSchemaFailure(p *callpath.Problem) *mcp.CallToolResult {
	var b strings.Builder
	b.WriteString("The arguments do not match the tool's input schema:")
	for _, v := range p.Errors {
		location := v.Location
		if location == "" {
			location = "(root)"
		}
		b.WriteString("\n- at " + truncateEcho(location) + ": " + truncateEcho(v.Message))
	}
	return mcpFailure(wire.CodeInvalidArguments, false, b.String())
}

// mcpOutcome renders a tool's outcome (its status and body) as a tool
// result: the body as text, byte for byte; structuredContent = the body
// when it is a JSON object; isError for a status of 400 and above.
func mcpOutcome(entry *tools.Entry, status int, body []byte) *mcp.CallToolResult {
	if mcpPassThrough(entry) {
		if res, ok := mcpUpstreamResult(body); ok {
			return res
		}
	}
	res := &mcp.CallToolResult{
		Content: []mcp.Content{&mcp.TextContent{Text: string(body)}},
		IsError: status >= 400,
	}
	if isJSONObject(body) {
		res.StructuredContent = json.RawMessage(body)
	}
	return res
}

// withExecution marks the result of call c that reached a claim
// (executed, replayed, or failed after the claim): its execution id,
// whether it is a replay, and the identity it was keyed on.
func withExecution(res *mcp.CallToolResult, c *callpath.Call, executionID string, replayed bool) *mcp.CallToolResult {
	if res.Meta == nil {
		res.Meta = mcp.Meta{}
	}
	res.Meta[wire.MetaExecutionID] = executionID
	res.Meta[wire.MetaReplayed] = replayed
	res.Meta[wire.MetaIdentity] = callpath.IdentityLabel(c.Identity)
	return res
}

// mcpPassThrough reports whether the tool's recorded body is an MCP
// CallToolResult to pass through unchanged (a tool of an MCP upstream
// server) rather than a body to wrap.
func mcpPassThrough(entry *tools.Entry) bool {
	return entry.Spec.ResultIsCallToolResult
}

// mcpUpstreamResult decodes an MCP upstream tool's recorded
// CallToolResult; its own _meta is kept, and the gateway's members are
// added to it by withExecution.
func mcpUpstreamResult(body []byte) (*mcp.CallToolResult, bool) {
	var res mcp.CallToolResult
	if err := json.Unmarshal(body, &res); err != nil {
		return nil, false
	}
	if res.Content == nil {
		res.Content = []mcp.Content{}
	}
	return &res, true
}

// isJSONObject reports whether body is one valid JSON object.
func isJSONObject(body []byte) bool {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	return len(trimmed) > 0 && trimmed[0] == '{' && json.Valid(body)
}
