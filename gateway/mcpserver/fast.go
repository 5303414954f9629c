package mcpserver

import (
	"bytes"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/tools"
)

// The fast path of tools/call. go-sdk stays the MCP implementation, but
// serving a tools/call through it decodes the message the guard already
// read several more times, each through a decoder that allocates a 32 KiB
// buffer, and connects a session per POST: more CPU than the call path
// itself costs. The guard hands every message it has read (valid JSON
// within the size limit, not a batch) to serveFast first. serveFast reads
// it in one pass with the guard's own member scanner and serves it when
// it is a tools/call it can answer exactly as go-sdk v1.8.0 would (the
// same status, headers and bytes: the scenarios of testdata/fastpath send
// the same requests through both and compare them); what it knows of
// go-sdk is copied in gosdk.go. Everything else goes on to the guard's
// own reading and to go-sdk: other methods, protocol versions it does not
// know, tools the go-sdk server does not list, anything the strict
// envelope refuses, and any request go-sdk would refuse or read
// differently (missing or mismatched SEP-2575 headers or _meta, an Accept,
// Host or Last-Event-ID go-sdk checks, params members beyond name,
// arguments and _meta, arguments that are not an object). The call itself
// is endpoint.callWith, as from go-sdk's tool handler. An operator turns
// it off with mcp.fast_path: false (Options.FastPathOff).

// gatewayImplementation is the serverInfo go-sdk adds to every 2026-07-28
// result: the gateway's (read once; the build does not change).
var gatewayImplementation = sync.OnceValue(mcpImplementation)

// serveFast answers body, a message the guard has read (valid JSON within
// the size limit, not a batch), when it is a tools/call the fast path
// serves, and reports true; or reports false, having written nothing, for
// the guard to read the message its own way and go-sdk to serve it.
func (e *endpoint) serveFast(w http.ResponseWriter, r *http.Request, body []byte) bool {
	if e.opts.fastPathOff() {
		return false
	}
	version := r.Header.Get(protocolVersionHeader)
	newProtocol := version >= newestProtocolEra
	if !fastCallVersions[version] || !fastTransportOK(r) {
		return false
	}
	msg, ok := scanToolsCall(body)
	if !ok || int64(msg.env.argumentBytes) > e.gw.MaxBodyBytes() || !fastProtocolOK(r.Header, msg.env.meta, version, msg.name) {
		return false
	}
	id, ok := fastID(msg.id)
	if !ok {
		return false
	}
	r = r.WithContext(withEnvelope(r.Context(), &msg.env))
	e.serverFor(r) // as go-sdk would: the server (and tools) of the current registry
	entry, listed := e.listedEntry(msg.name)
	if !listed {
		return false // tool_not_found and not-listed tools: go-sdk's path and dispatchCall
	}
	// A continuation (inputResponses, requestState) is go-sdk's to read
	// (scanToolsCall leaves it); a first round may get an upstream's input
	// requests back when the client's protocol has them.
	res, err := e.callWith(r.Context(), entry, &mcp.CallToolRequest{
		Params: &mcp.CallToolParamsRaw{Name: msg.name, Arguments: msg.arguments},
		Extra:  &mcp.RequestExtra{Header: r.Header},
	}, callpath.MultiRoundTrip{AcceptsInputRequests: version >= mcpProtocolMultiRoundTrip})
	// From here the call has run: the answer is this path's, never go-sdk's
	// (which would run an unkeyed call a second time).
	answer, status := fastResponse(id, res, err, newProtocol)
	h := w.Header()
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("Content-Type", "application/json")
	if status != 0 {
		w.WriteHeader(status)
	}
	_, _ = w.Write(answer)
	e.opts.countFast()
	return true
}

// fastPathSwitch turns the fast path off and on and counts the calls it
// served (Options.fastPath; tests only).
type fastPathSwitch struct {
	off    atomic.Bool
	served atomic.Int64
}

// fastPathOff reports whether the fast path is turned off: by the
// operator (mcp.fast_path: false) or, at run time, by a test.
func (o Options) fastPathOff() bool {
	return o.FastPathOff || (o.fastPath != nil && o.fastPath.off.Load())
}

// countFast counts a call the fast path served (tests).
func (o Options) countFast() {
	if o.fastPath != nil {
		o.fastPath.served.Add(1)
	}
}

// listedEntry returns the registry's tool of that name when the go-sdk
// server lists it, and it declares no parameter headers (x-mcp-header,
// which go-sdk checks against the request's headers).
func (e *endpoint) listedEntry(name string) (*tools.Entry, bool) {
	entry, found := e.gw.Tools().Lookup(name)
	if !found || bytes.Contains(entry.Spec.InputSchema, []byte("x-mcp-header")) {
		return nil, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return entry, slices.Contains(e.entries, entry)
}
