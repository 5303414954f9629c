package mcpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/wire"
)

// JSON-RPC codes of messages that are not a request the server can read.
const (
	rpcParseError     = -32700
	rpcInvalidRequest = -32600
	rpcMethodNotFound = -32601
)

// guard lets through to go-sdk only what is one JSON-RPC request or
// notification of a method the server has, as application/json within
// the size limit, with the strict envelope of envelope.go, and answers
// everything else itself with a JSON-RPC error (never plain text).
// Nothing it refuses reaches a tool or the store. Batches are refused
// whatever the protocol version: go-sdk would run the calls of a batch
// sent without a protocol version header, and the contract refuses them.
func (e *endpoint) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		refuse := func(status int, req *jsonrpc.Request, rpcErr *jsonrpc.Error) {
			callpath.MarkInvalid(ctx)
			writeRPCError(w, status, req, rpcErr)
		}
		// A refusal with a problem code has the code's HTTP status (the
		// code table's); rpcCode is the level refused: the message
		// (-32700, -32600) or the params (-32602).
		refuseProblem := func(req *jsonrpc.Request, rpcCode int64, p *callpath.Problem) {
			refuse(p.Status, req, &jsonrpc.Error{Code: rpcCode, Message: truncateEcho(p.Detail), Data: problemData(p)})
		}
		if !callpath.IsJSONRequest(r.Header) {
			refuseProblem(nil, rpcInvalidRequest, callpath.NewProblem(wire.CodeUnsupportedMediaType, "send JSON-RPC messages as application/json"))
			return
		}
		limit := e.gw.MaxBodyBytes() + envelopeBytes
		body, err := io.ReadAll(http.MaxBytesReader(callpath.InnermostWriter(w), r.Body, limit))
		if err != nil {
			var maxErr *http.MaxBytesError
			if errors.As(err, &maxErr) {
				refuseProblem(nil, rpcInvalidRequest, callpath.NewProblem(wire.CodePayloadTooLarge, "the request may be at most "+strconv.FormatInt(limit, 10)+" bytes"))
				return
			}
			refuseProblem(nil, rpcParseError, callpath.NewProblem(wire.CodeInvalidJSON, "the request body could not be read"))
			return
		}
		// One JSON value and nothing after it: trailing data is a parse
		// error, never run with the rest dropped.
		if !json.Valid(body) {
			refuseProblem(nil, rpcParseError, callpath.NewProblem(wire.CodeInvalidJSON, "the request is not one JSON value (nothing may follow the message)"))
			return
		}
		if trimmed := bytes.TrimLeft(body, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '[' {
			refuse(http.StatusBadRequest, nil, &jsonrpc.Error{Code: rpcInvalidRequest,
				Message: "JSON-RPC batches are not supported: send one message per POST"})
			return
		}
		// A plain tools/call is served from one pass over body (fast.go).
		if fast := (&plainTextCatcher{ResponseWriter: w}); e.serveFast(fast, r, body) {
			fast.finish(nil)
			return
		}
		env, err := readEnvelope(body)
		if err != nil {
			refuse(http.StatusBadRequest, nil, &jsonrpc.Error{Code: rpcInvalidRequest,
				Message: "the request is not a JSON-RPC 2.0 request: " + err.Error()})
			return
		}
		msg, err := jsonrpc.DecodeMessage(body)
		if err != nil {
			refuse(http.StatusBadRequest, nil, &jsonrpc.Error{Code: rpcInvalidRequest,
				Message: truncateEcho("the request is not a JSON-RPC 2.0 request: " + err.Error())})
			return
		}
		req, isRequest := msg.(*jsonrpc.Request)
		if !isRequest {
			refuse(http.StatusBadRequest, nil, &jsonrpc.Error{Code: rpcInvalidRequest,
				Message: "this server sends no requests, so it takes no responses"})
			return
		}
		if !mcpServerMethods[req.Method] {
			refuse(unknownMethodStatus(r.Header.Get(protocolVersionHeader)), req, &jsonrpc.Error{Code: rpcMethodNotFound,
				Message: "method not found: this server serves tools (tools/list, tools/call)"})
			return
		}
		// The arguments of a call have REST's limit, so a call accepted
		// over MCP is accepted over REST.
		if req.Method == "tools/call" && int64(env.argumentBytes) > e.gw.MaxBodyBytes() {
			refuseProblem(req, wire.RPCInvalidParams, callpath.NewProblem(wire.CodePayloadTooLarge,
				"the arguments may be at most "+strconv.FormatInt(e.gw.MaxBodyBytes(), 10)+" bytes, as over REST"))
			return
		}
		r = r.WithContext(withEnvelope(ctx, env))
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		rw := &plainTextCatcher{ResponseWriter: w}
		next.ServeHTTP(rw, r)
		rw.finish(req)
	})
}

// rpcErrorResponse is a JSON-RPC error response; id is null when the
// request's id is unknown, as JSON-RPC 2.0 requires.
type rpcErrorResponse struct {
	JSONRPC string         `json:"jsonrpc"`
	ID      any            `json:"id"`
	Error   *jsonrpc.Error `json:"error"`
}

// writeRPCError writes rpcErr as the answer to req (id null when req is
// nil) with the HTTP status the refusal has in the protocol version.
func writeRPCError(w http.ResponseWriter, status int, req *jsonrpc.Request, rpcErr *jsonrpc.Error) {
	var id any
	if req != nil {
		id = req.ID.Raw()
	}
	body, err := json.Marshal(rpcErrorResponse{JSONRPC: "2.0", ID: id, Error: rpcErr})
	if err != nil {
		body = []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"internal error"}}`)
	}
	h := w.Header()
	h.Set("Content-Type", wire.MediaTypeJSON)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// plainTextCatcher turns go-sdk's plain-text refusals (http.Error: a
// missing id, missing params, a protocol version it does not serve, a
// Host it does not trust) into JSON-RPC errors with the same status, so
// every answer of /mcp is JSON-RPC, and caps what go-sdk's own JSON-RPC
// errors repeat of the request (its "invalid params: unmarshaling ..."
// quotes the whole params, its "Resource not found" the uri) to maxEcho
// bytes. Everything else passes through.
type plainTextCatcher struct {
	http.ResponseWriter
	caught bool
	status int
	text   bytes.Buffer
	// pending is the status of a JSON answer, held back until its body
	// (one Write in go-sdk's JSON response mode) is seen.
	pending int
	// started: a status or body went out (or was held back) already.
	started bool
}

func (c *plainTextCatcher) WriteHeader(status int) {
	if c.started {
		return // as net/http: a second status is ignored
	}
	c.started = true
	contentType := c.Header().Get("Content-Type")
	switch {
	case status >= 400 && strings.HasPrefix(contentType, "text/plain"):
		c.caught, c.status = true, status
		c.Header().Del("X-Content-Type-Options")
	case strings.HasPrefix(contentType, wire.MediaTypeJSON):
		c.pending = status
	default:
		c.ResponseWriter.WriteHeader(status)
	}
}

func (c *plainTextCatcher) Write(b []byte) (int, error) {
	if !c.started {
		c.WriteHeader(http.StatusOK) // a body without a status is a 200
	}
	if c.caught {
		return c.text.Write(b)
	}
	if c.pending != 0 {
		status := c.pending
		c.pending = 0
		if capped, changed := capRPCErrorEcho(b); changed {
			c.Header().Set("Content-Length", strconv.Itoa(len(capped)))
			c.ResponseWriter.WriteHeader(status)
			if _, err := c.ResponseWriter.Write(capped); err != nil {
				return 0, err
			}
			return len(b), nil
		}
		c.ResponseWriter.WriteHeader(status)
	}
	return c.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (c *plainTextCatcher) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// finish writes the JSON-RPC error for a caught refusal, or the held-back
// status of an answer without a body.
func (c *plainTextCatcher) finish(req *jsonrpc.Request) {
	if c.pending != 0 {
		c.ResponseWriter.WriteHeader(c.pending)
		c.pending = 0
	}
	if !c.caught {
		return
	}
	writeRPCError(c.ResponseWriter, c.status, req, &jsonrpc.Error{Code: rpcInvalidRequest,
		Message: truncateEcho(strings.TrimSpace(c.text.String()))})
}

// maxForeignData is the largest error.data of go-sdk's own passed as it
// is; the gateway's own data is capped member by member (problemData).
const maxForeignData = 1 << 10

// capRPCErrorEcho returns the JSON-RPC error response in body with its
// message cut to maxEcho bytes and a larger data than maxForeignData
// reduced to its code and retryable. A result, or a small error, is left
// alone without being parsed (the check reads the first bytes only).
func capRPCErrorEcho(body []byte) ([]byte, bool) {
	if len(body) <= 2*maxEcho+maxForeignData {
		return body, false
	}
	head := body[:min(len(body), 2*maxEcho)] // the id is at most maxEcho bytes
	errorAt := bytes.Index(head, []byte(`"error":`))
	if errorAt < 0 || bytes.Contains(head[:errorAt], []byte(`"result":`)) {
		return body, false
	}
	msg, err := jsonrpc.DecodeMessage(body)
	resp, ok := msg.(*jsonrpc.Response)
	if err != nil || !ok || resp.Error == nil {
		return body, false
	}
	var rpcErr *jsonrpc.Error
	if !errors.As(resp.Error, &rpcErr) {
		return body, false
	}
	capped := &jsonrpc.Error{Code: rpcErr.Code, Message: truncateEcho(rpcErr.Message), Data: rpcErr.Data}
	if len(capped.Data) > maxForeignData {
		var kept struct {
			Code      string `json:"code,omitempty"`
			Retryable *bool  `json:"retryable,omitempty"`
		}
		_ = json.Unmarshal(capped.Data, &kept)
		capped.Data = nil
		if kept.Code != "" {
			capped.Data, _ = json.Marshal(kept)
		}
	}
	out, err := json.Marshal(rpcErrorResponse{JSONRPC: "2.0", ID: resp.ID.Raw(), Error: capped})
	if err != nil {
		return body, false
	}
	return out, true
}
