package mcpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/gateway"
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
// same status, headers and bytes: mcpfast_test.go sends the same requests
// through both and compares them); everything else goes on to the guard's
// own reading and to go-sdk: other methods, protocol versions it does not
// know, tools the go-sdk server does not list, anything the strict
// envelope refuses, and any request go-sdk would refuse or read
// differently (missing or mismatched SEP-2575 headers or _meta, an Accept,
// Host or Last-Event-ID go-sdk checks, params members beyond name,
// arguments and _meta, arguments that are not an object). The call itself
// is endpoint.call, as from go-sdk's tool handler.

// fastCallVersions are the Mcp-Protocol-Version values the fast path
// serves: every version go-sdk v1.8.0 serves. A request without the header
// (go-sdk reads it as 2025-03-26) goes through go-sdk.
var fastCallVersions = map[string]bool{
	"2026-07-28": true,
	"2025-11-25": true,
	"2025-06-18": true,
	"2025-03-26": true,
	"2024-11-05": true,
}

// The _meta members of the sessionless protocol (SEP-2575, 2026-07-28)
// that go-sdk reads on every call.
const (
	metaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	metaClientInfo         = "io.modelcontextprotocol/clientInfo"
	metaServerInfo         = "io.modelcontextprotocol/serverInfo"
)

// The HTTP headers go-sdk checks on a POST.
const (
	headerMCPMethod   = "Mcp-Method"
	headerMCPName     = "Mcp-Name"
	headerLastEventID = "Last-Event-ID"
)

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
	}, gateway.MultiRoundTrip{AcceptsInputRequests: version >= mcpProtocolMultiRoundTrip})
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

// fastTransportOK reports whether go-sdk's transport would take the POST
// as it is: JSON content, an Accept of both JSON and an event stream, no
// Last-Event-ID, and a Host it trusts (go-sdk refuses a non-loopback Host
// on a loopback listener, against DNS rebinding).
func fastTransportOK(r *http.Request) bool {
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		if base, _, err := mime.ParseMediaType(ct); err != nil || base != "application/json" {
			return false
		}
	}
	if len(r.Header.Values(headerLastEventID)) > 0 || !acceptsJSONAndStream(r.Header.Values("Accept")) {
		return false
	}
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && local != nil {
		if isLoopbackAddr(local.String()) && !isLoopbackAddr(r.Host) {
			return false
		}
	}
	return true
}

// acceptsJSONAndStream is go-sdk's reading of Accept: both JSON and an
// event stream, by media range.
func acceptsJSONAndStream(values []string) bool {
	jsonOK, streamOK := false, false
	for _, value := range values {
		for _, token := range strings.Split(value, ",") {
			base, _, _ := strings.Cut(strings.TrimSpace(token), ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK && streamOK
}

// isLoopbackAddr is go-sdk's loopback test of a host or host:port.
func isLoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// fastProtocolOK reports whether the request carries what go-sdk checks
// for its protocol version: on 2026-07-28 the Mcp-Method and Mcp-Name
// headers equal to the body's, _meta's protocolVersion equal to the
// header, valid clientCapabilities and, when present, a valid clientInfo;
// before it, no protocolVersion in _meta (go-sdk would check it against
// the header).
func fastProtocolOK(h http.Header, meta map[string]json.RawMessage, version, name string) bool {
	raw, hasVersion := meta[metaProtocolVersion]
	if version < newestProtocolEra {
		return !hasVersion
	}
	var metaVersion string
	if !hasVersion || json.Unmarshal(raw, &metaVersion) != nil || metaVersion != version {
		return false
	}
	if h.Get(headerMCPMethod) != "tools/call" || h.Get(headerMCPName) != name {
		return false
	}
	// go-sdk's reading of the capabilities (its clientCapabilitiesV2:
	// ClientCapabilities with roots as {listChanged}).
	var capabilities struct {
		mcp.ClientCapabilities
		Roots *struct {
			ListChanged bool `json:"listChanged,omitempty"`
		} `json:"roots,omitempty"`
	}
	if !isObjectText(meta[metaClientCapabilities]) || json.Unmarshal(meta[metaClientCapabilities], &capabilities) != nil {
		return false
	}
	if info, present := meta[metaClientInfo]; present {
		var impl mcp.Implementation
		if !isObjectText(info) || json.Unmarshal(info, &impl) != nil {
			return false
		}
	}
	return true
}

// fastResponse encodes the answer go-sdk would send for the result or
// error of a tools/call, and the HTTP status it would set (0: an implicit
// 200). On 2026-07-28 go-sdk marks a result complete and names the server
// in its _meta, and answers -32602 with 400.
func fastResponse(id jsonrpc.ID, res *mcp.CallToolResult, callErr error, newProtocol bool) ([]byte, int) {
	if callErr == nil && res == nil {
		callErr = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the call has no result"}
	}
	if callErr != nil {
		body, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: callErr})
		if err != nil {
			return internalErrorBody(id), 0
		}
		status := 0
		var rpcErr *jsonrpc.Error
		if newProtocol && errors.As(callErr, &rpcErr) {
			switch rpcErr.Code {
			case jsonrpc.CodeMethodNotFound:
				status = http.StatusNotFound
			case jsonrpc.CodeInvalidParams, mcp.CodeUnsupportedProtocolVersion, mcp.CodeMissingRequiredClientCapabilities:
				status = http.StatusBadRequest
			}
		}
		return body, status
	}
	if res.Content == nil {
		copied := *res
		copied.Content = []mcp.Content{} // go-sdk's: never "content": null
		res = &copied
	}
	if newProtocol {
		if res.Meta == nil {
			res.Meta = mcp.Meta{}
		}
		if _, named := res.Meta[metaServerInfo]; !named {
			res.Meta[metaServerInfo] = gatewayImplementation()
		}
	}
	result, err := res.MarshalJSON()
	if err != nil || len(result) < 2 || result[len(result)-1] != '}' {
		return internalErrorBody(id), 0
	}
	if newProtocol {
		// go-sdk's resultType (unexported) is the last member it writes
		// (withResultType says the same for the answers of dispatchCall).
		kind := `,"resultType":"complete"}`
		if len(res.InputRequests) > 0 {
			kind = `,"resultType":"input_required"}`
		}
		result = append(result[:len(result)-1:len(result)-1], kind...)
	}
	body, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Result: result})
	if err != nil {
		return internalErrorBody(id), 0
	}
	return body, 0
}

// internalErrorBody answers a result that could not be encoded (no
// gateway result fails to; a JSON-RPC answer is owed all the same).
func internalErrorBody(id jsonrpc.ID) []byte {
	body, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}})
	if err != nil {
		return []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"internal error"}}`)
	}
	return body
}
