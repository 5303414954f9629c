package mcpserver

import (
	"encoding/json"
	"errors"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// What the MCP endpoint copies of go-sdk v1.8.0
// (github.com/modelcontextprotocol/go-sdk, the version go.mod requires):
// the protocol versions and methods it serves, the transport and protocol
// checks it makes on a POST, the shape in which it decodes the client's
// capabilities, how it maps a JSON-RPC error to an HTTP status, and the
// members it adds to a result (resultType, serverInfo), some of them
// unexported in go-sdk. The guard and the fast path (fast.go) must agree
// with go-sdk on every one; the differential scenarios in
// testdata/fastpath show they do, and TestFastPathScenariosMatchGoSDK
// fails when go.mod names another go-sdk, so an upgrade re-validates this
// file before the fast path runs against it (mcp.fast_path: false serves
// everything through go-sdk meanwhile).

// mcpServerMethods are the methods an MCP client may send to this server
// (go-sdk v1.8.0 answers each). Anything else is -32601 before go-sdk
// sees it: go-sdk answers an unknown method of the older protocol
// versions with a plain-text 400, which a client cannot read as JSON-RPC.
var mcpServerMethods = map[string]bool{
	"initialize":                       true,
	"ping":                             true,
	"server/discover":                  true,
	"tools/list":                       true,
	"tools/call":                       true,
	"prompts/list":                     true,
	"prompts/get":                      true,
	"resources/list":                   true,
	"resources/templates/list":         true,
	"resources/read":                   true,
	"resources/subscribe":              true,
	"resources/unsubscribe":            true,
	"subscriptions/listen":             true,
	"completion/complete":              true,
	"logging/setLevel":                 true,
	"notifications/initialized":        true,
	"notifications/cancelled":          true,
	"notifications/progress":           true,
	"notifications/roots/list_changed": true,
}

// protocolVersionHeader carries the client's MCP protocol version.
const protocolVersionHeader = "Mcp-Protocol-Version"

// newestProtocolEra is the first protocol version (SEP-2575) that gives
// JSON-RPC errors their own HTTP status (404 for an unknown method).
const newestProtocolEra = "2026-07-28"

// unknownMethodStatus is the HTTP status of the -32601 answer to a method
// the server does not have, as go-sdk gives it on the client's protocol
// version: 404 from newestProtocolEra on, a 200 before it.
func unknownMethodStatus(version string) int {
	if version >= newestProtocolEra {
		return http.StatusNotFound
	}
	return http.StatusOK
}

// mcpProtocolMultiRoundTrip is the first MCP protocol version with multi
// round-trip requests.
const mcpProtocolMultiRoundTrip = "2026-07-28"

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
	// go-sdk writes resultType (unexported) and then inputRequests after
	// every other member (withResultType says the same for the answers of
	// dispatchCall).
	inputRequests := res.InputRequests
	if inputRequests != nil {
		copied := *res
		copied.InputRequests = nil
		res = &copied
	}
	result, err := res.MarshalJSON()
	if err != nil || len(result) < 2 || result[len(result)-1] != '}' {
		return internalErrorBody(id), 0
	}
	result = result[: len(result)-1 : len(result)-1]
	if newProtocol {
		kind := `,"resultType":"complete"`
		if len(inputRequests) > 0 {
			kind = `,"resultType":"input_required"`
		}
		result = append(result, kind...)
	}
	if inputRequests != nil {
		requests, err := json.Marshal(inputRequests)
		if err != nil {
			return internalErrorBody(id), 0
		}
		result = append(append(result, `,"inputRequests":`...), requests...)
	}
	result = append(result, '}')
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

// withResultType gives res the resultType go-sdk's server sets on the
// results of its own tool handlers for a client of protocol 2026-07-28 or
// later ("complete", or "input_required" when it asks for input), for a
// result answered outside them (a retired tool's replay, answered by
// middleware), so both render alike. go-sdk keeps the field unexported and
// reads it from JSON only.
func withResultType(req *mcp.CallToolRequest, res *mcp.CallToolResult) *mcp.CallToolResult {
	if !mcpMultiRoundTrip(req).AcceptsInputRequests {
		return res
	}
	raw, err := json.Marshal(res)
	if err != nil {
		return res
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return res
	}
	kind := "complete"
	if len(res.InputRequests) > 0 {
		kind = "input_required"
	}
	fields["resultType"], _ = json.Marshal(kind)
	raw, err = json.Marshal(fields)
	if err != nil {
		return res
	}
	var typed mcp.CallToolResult
	if json.Unmarshal(raw, &typed) != nil {
		return res
	}
	return &typed
}
