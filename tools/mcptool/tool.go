package mcptool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/tools/traceprop"
	"github.com/toolgateway/toolgateway/wire"
)

// Tool is one tool of an MCP server as the gateway serves it. It is safe for
// concurrent use.
type Tool struct {
	up           *upstream
	upstreamName string
	spec         tools.Spec
	// annotations are the server's hints (nil: none sent), for `gateway
	// scan`; the gateway itself only reads readOnlyHint.
	annotations *mcp.ToolAnnotations
}

var (
	_ tools.Tool       = (*Tool)(nil)
	_ tools.Provenance = (*Tool)(nil)
)

// Spec is the tool as the server listed it: the gateway's name (prefix +
// the server's name), the server's description and input schema, read-only
// when configured so or marked readOnlyHint, and the server's policy.
func (t *Tool) Spec() tools.Spec { return t.spec }

// Annotations are the hints the server listed the tool with (nil: none):
// hints from a server the gateway does not control, never a guarantee.
func (t *Tool) Annotations() *mcp.ToolAnnotations { return t.annotations }

// UpstreamName is the tool's name on its server (without the prefix).
func (t *Tool) UpstreamName() string { return t.upstreamName }

// Server is the name of the tool's server (its mcp_servers: entry).
func (t *Tool) Server() string { return t.up.cfg.Name }

// Provenance names the server and the tool's name there.
func (t *Tool) Provenance() string {
	return fmt.Sprintf("MCP server %q, tool %q", t.up.cfg.Name, t.upstreamName)
}

// Call forwards the call as tools/call with the client's arguments, the
// call's identity in _meta (see Meta) and, when ctx carries a span, its W3C
// trace context as _meta's "traceparent" (and "tracestate"), on one of the
// server's pooled sessions. A continuation (req.Continuation) adds the
// client's inputResponses and requestState.
//
// Outcomes: a result with isError false is status 200 with the
// CallToolResult JSON as body (application/json), recorded and replayed by
// the gateway; isError true is the same, unless the server is configured
// record_is_error: false, then status 500 with the same body (not
// recorded: a retry runs the tool again). An input_required result is a
// Response with InputRequired set when the client can answer it
// (req.AcceptsInputRequests), else an error. Errors wrap:
// tools.ErrResponseTooLarge for a message over max_response_bytes (the
// session goes on); tools.ErrOutcomeUncertain when the request was written
// and the session failed before an answer came (the server may have acted);
// tools.ErrUpstreamRejected (an ErrUpstreamUnreachable too) for a JSON-RPC
// error the server answered, with tools.ErrNotExecuted when it proves the
// tool did not run (rpcNotExecuted); tools.ErrUpstreamUnreachable for a refused
// request or one never written; ctx's error at the end of ctx (the tool's
// timeout).
func (t *Tool) Call(ctx context.Context, req *tools.Request) (*tools.Response, error) {
	if t.spec.Policy.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.spec.Policy.Timeout)
		defer cancel()
	}
	cs, err := t.up.pool.get()
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %v", t.Provenance(), tools.ErrUpstreamUnreachable, err)
	}
	args := json.RawMessage(req.Arguments)
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	meta := Meta(t.spec.Name, req)
	// The trace context of the call (the gateway's span of the tool's
	// execution) goes in _meta, the MCP convention, so the server's spans
	// join the agent's trace; without a span nothing is added.
	traceprop.InjectMeta(ctx, meta)
	params := &mcp.CallToolParams{Name: t.upstreamName, Arguments: args, Meta: meta}
	if c := req.Continuation; c != nil {
		if len(c.InputResponses) > 0 {
			if err := json.Unmarshal(c.InputResponses, &params.InputResponses); err != nil {
				return nil, fmt.Errorf("%s: the client's inputResponses: %w", t.Provenance(), err)
			}
		}
		params.RequestState = c.RequestState
	}
	callCtx, mark := withSendMark(ctx)
	res, err := cs.CallTool(callCtx, params)
	if err != nil {
		return nil, t.failure(ctx, cs, mark, err)
	}
	if res.Content == nil {
		res.Content = []mcp.Content{} // "content" is required: [] rather than null
	}
	body, err := json.Marshal(res)
	if err != nil {
		return nil, fmt.Errorf("%s: encode the result: %w", t.Provenance(), err)
	}
	if res.NeedsInput() {
		// A multi round-trip request for client input: not an outcome (the
		// server has not acted yet). Only the gateway's client can answer.
		if !req.AcceptsInputRequests {
			return nil, fmt.Errorf("%s: the server asked for client input (multi round-trip), which this client cannot give: call over MCP (protocol 2026-07-28)", t.Provenance())
		}
		return &tools.Response{Status: http.StatusOK, ContentType: "application/json", Body: body, InputRequired: true}, nil
	}
	status := http.StatusOK
	if res.IsError && !t.up.cfg.RecordIsError {
		status = http.StatusInternalServerError
	}
	return &tools.Response{Status: status, ContentType: "application/json", Body: body,
		Relayed: true, NotExecuted: metaNotExecuted(res.Meta)}, nil
}

// failure classifies a tools/call error for the gateway.
func (t *Tool) failure(ctx context.Context, cs *mcp.ClientSession, mark *sendMark, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("%s: %w", t.Provenance(), ctxErr)
	}
	if limit, ok := responseTooLarge(err); ok {
		// The gateway's transport discarded the answer; the session is fine.
		return fmt.Errorf("%s: %w: the result exceeds max_response_bytes (%d bytes)", t.Provenance(), tools.ErrResponseTooLarge, limit)
	}
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) && !transportSentinel(rpcErr) {
		// The server answered, with an error instead of a result: the session
		// is fine, the call did not produce an outcome to record. Whether it
		// acted first, only a protocol refusal or its marker tells.
		if rpcNotExecuted(rpcErr) {
			return fmt.Errorf("%s: %w (%w): JSON-RPC error %d: %s", t.Provenance(), tools.ErrUpstreamRejected, tools.ErrNotExecuted, rpcErr.Code, rpcErr.Message)
		}
		return fmt.Errorf("%s: %w: JSON-RPC error %d: %s", t.Provenance(), tools.ErrUpstreamRejected, rpcErr.Code, rpcErr.Message)
	}
	if errors.Is(err, mcp.ErrConnectionClosed) {
		// The session is over (its supervisor connects a new one); take it
		// out of service now. A failure of this call's request alone (an
		// HTTP request that failed) leaves the session to the other calls
		// on it: go-sdk ends it itself when it is broken.
		t.up.pool.broken(cs)
	}
	if mark.mayHaveRun() {
		// The request reached the server and no answer came back (the
		// process died, the connection dropped): it may have acted.
		return fmt.Errorf("%s: %w: no answer after the request was sent: %v", t.Provenance(), tools.ErrOutcomeUncertain, err)
	}
	// The request never reached the server, or the server refused it.
	return fmt.Errorf("%s: %w: %v", t.Provenance(), tools.ErrUpstreamUnreachable, err)
}

// transportSentinel reports whether e is one of go-sdk's own transport
// errors, which it dresses as JSON-RPC errors (a request the transport
// could not deliver, a closing connection), rather than an error the server
// answered.
func transportSentinel(e *jsonrpc.Error) bool {
	switch {
	case e.Code == -32005 && e.Message == "rejected by transport",
		e.Code == -32004 && e.Message == "server is closing",
		e.Code == -32003 && e.Message == "client is closing":
		return true
	}
	return false
}

// Meta is the _meta of a forwarded tools/call: the call's identity, so the
// server can deduplicate and fence too. tool is the gateway's name of the
// tool. Members (under the io.github.toolgateway/ prefix): idempotencyKey
// (tools.ScopedKey of tenant, tool and the client's key), tenant,
// sessionId, stepIndex (JSON integer), executionId and fencingToken (JSON
// integer); each only when the call has it (a read-only call has no key,
// execution id or fencing token).
func Meta(tool string, req *tools.Request) mcp.Meta {
	meta := mcp.Meta{wire.MetaTenant: req.Tenant}
	if req.IdempotencyKey != "" {
		meta[wire.MetaIdempotencyKey] = tools.ScopedKey(req.Tenant, tool, req.IdempotencyKey)
	}
	if req.SessionID != "" {
		meta[wire.MetaSessionID] = req.SessionID
	}
	if req.HasStep {
		meta[wire.MetaStepIndex] = req.StepIndex
	}
	if req.ExecutionID != "" {
		meta[wire.MetaExecutionID] = req.ExecutionID
	}
	if req.FencingToken > 0 {
		meta[wire.MetaFencingToken] = req.FencingToken
	}
	return meta
}

// standIn answers for a tool of a server whose tools are not listed yet:
// it is found (so the client gets 503 upstream_unavailable, retryable,
// rather than 404) but never runs and is never published by discovery.
type standIn struct {
	up   *upstream
	spec tools.Spec
}

var (
	_ tools.Availability = (*standIn)(nil)
	_ tools.Provenance   = (*standIn)(nil)
)

func (s *standIn) Spec() tools.Spec { return s.spec }

// Available reports the server as not listed yet.
func (s *standIn) Available() error {
	return fmt.Errorf("MCP server %q: %w", s.up.cfg.Name, tools.ErrUpstreamUnavailable)
}

// Call runs nothing.
func (s *standIn) Call(context.Context, *tools.Request) (*tools.Response, error) {
	return nil, s.Available()
}

// Provenance names the server.
func (s *standIn) Provenance() string {
	return fmt.Sprintf("MCP server %q (not listed yet), tool %q", s.up.cfg.Name, s.spec.Name)
}
