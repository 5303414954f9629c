package benchtool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/toolgateway/toolgateway/wire"
)

// API is the gateway API a load calls.
type API string

// The gateway's APIs.
const (
	// APIREST posts to /api/tools/v1/{tool}, the identity in headers.
	APIREST API = "rest"
	// APIMCP sends a tools/call to /mcp, the identity in params._meta.
	APIMCP API = "mcp"
)

// ParseAPI checks an API name.
func ParseAPI(s string) (API, error) {
	switch a := API(s); a {
	case APIREST, APIMCP:
		return a, nil
	}
	return "", fmt.Errorf("benchtool: api %q: want rest or mcp", s)
}

// How an MCP answer is counted in Result.Statuses, next to HTTP statuses:
// a tool result without isError counts as 200, one with isError as
// StatusMCPIsError, and a JSON-RPC error under its (negative) code, e.g.
// -32001 request_in_progress.
const StatusMCPIsError = -1

// DefaultMCPProtocolVersion is the MCP protocol version the load speaks:
// the newest go-sdk v1.8.0 serves (and its client negotiates), whose
// requests carry the version in _meta and the Mcp-Method and Mcp-Name
// headers.
const DefaultMCPProtocolVersion = "2026-07-28"

// The _meta members every 2026-07-28 request carries in place of an
// initialize: the protocol version (the Mcp-Protocol-Version header's), the
// client's capabilities (required) and its name.
const (
	metaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	metaClientInfo         = "io.modelcontextprotocol/clientInfo"
)

// The HTTP headers of an MCP POST.
const (
	headerMCPProtocolVersion = "Mcp-Protocol-Version"
	headerMCPMethod          = "Mcp-Method"
	headerMCPName            = "Mcp-Name"
)

// mcpSender sends each request to url+"/mcp" as one raw JSON-RPC
// tools/call POST, as an MCP client of the Streamable HTTP transport
// would (stateless: no initialize, no session), without an MCP client
// library, so the client's cost stays small and out of the server's
// figures. The arguments are the canonical bytes REST posts, the identity
// (session, step, and the derived key, which the gateway checks) is in
// params._meta. Every answer is verified: the id is the request's, a
// result has content and, from the gateway, its executionId and replayed
// flag.
func (l *Load) mcpSender(url, auth string) sendFunc {
	var nextID atomic.Int64
	endpoint := url + "/mcp"
	name, _ := json.Marshal(l.cfg.Tool)
	version := l.cfg.MCPProtocolVersion
	return func(ctx context.Context, r *request) (int, bool, error) {
		id := nextID.Add(1)
		body := l.mcpBody(id, name, version, r)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
		if err != nil {
			return 0, false, fmt.Errorf("benchtool: build request: %w", err)
		}
		h := req.Header
		h.Set("Content-Type", "application/json")
		h.Set("Accept", "application/json, text/event-stream")
		h.Set(headerMCPProtocolVersion, version)
		h.Set(headerMCPMethod, "tools/call")
		h.Set(headerMCPName, l.cfg.Tool)
		if auth != "" {
			h.Set(wire.HeaderAuthorization, auth)
		}
		resp, err := l.cfg.Client.Do(req)
		if err != nil {
			return 0, false, fmt.Errorf("benchtool: send: %w", err)
		}
		defer resp.Body.Close()
		answer, err := io.ReadAll(resp.Body)
		if err != nil {
			return 0, false, fmt.Errorf("benchtool: read answer: %w", err)
		}
		return l.checkMCPAnswer(id, resp.StatusCode, answer)
	}
}

// mcpBody is the tools/call of r with JSON-RPC id id.
func (l *Load) mcpBody(id int64, name []byte, version string, r *request) []byte {
	session, _ := json.Marshal(r.session)
	key, _ := json.Marshal(r.key)
	b := make([]byte, 0, 320+len(r.body))
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, `,"method":"tools/call","params":{"name":`...)
	b = append(b, name...)
	b = append(b, `,"arguments":`...)
	b = append(b, r.body...)
	b = append(b, `,"_meta":{"`+metaProtocolVersion+`":"`...)
	b = append(b, version...)
	b = append(b, `","`+metaClientCapabilities+`":{},"`+metaClientInfo+`":{"name":"gatewaybench","version":"1"}`...)
	b = append(b, `,"`+wire.MetaSessionID+`":`...)
	b = append(b, session...)
	b = append(b, `,"`+wire.MetaStepIndex+`":`...)
	b = strconv.AppendUint(b, r.index, 10)
	b = append(b, `,"`+wire.MetaIdempotencyKey+`":`...)
	b = append(b, key...)
	b = append(b, `}}}`...)
	return b
}

// mcpAnswer is what the load reads of a JSON-RPC answer.
type mcpAnswer struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  *struct {
		Content []json.RawMessage          `json:"content"`
		IsError bool                       `json:"isError"`
		Meta    map[string]json.RawMessage `json:"_meta"`
	} `json:"result"`
	Error *struct {
		Code int `json:"code"`
	} `json:"error"`
}

// errBadMCPAnswer marks an answer that is not the JSON-RPC answer of the
// request sent.
var errBadMCPAnswer = errors.New("benchtool: not the answer of the tools/call sent")

// checkMCPAnswer verifies one answer and reports it as a sendFunc does.
func (l *Load) checkMCPAnswer(id int64, status int, body []byte) (int, bool, error) {
	var a mcpAnswer
	if err := json.Unmarshal(body, &a); err != nil || a.JSONRPC != "2.0" || string(a.ID) != strconv.FormatInt(id, 10) {
		return 0, false, fmt.Errorf("%w: HTTP %d, %.200q", errBadMCPAnswer, status, body)
	}
	switch {
	case a.Error != nil && a.Result == nil:
		return a.Error.Code, false, nil
	case a.Result == nil || a.Error != nil || status != http.StatusOK || len(a.Result.Content) == 0:
		return 0, false, fmt.Errorf("%w: HTTP %d, %.200q", errBadMCPAnswer, status, body)
	}
	replayed := false
	if !l.cfg.NoIdempotency {
		var executionID string
		if err := json.Unmarshal(a.Result.Meta[wire.MetaExecutionID], &executionID); err != nil || executionID == "" {
			return 0, false, fmt.Errorf("%w: a result without its executionId: %.200q", errBadMCPAnswer, body)
		}
		if err := json.Unmarshal(a.Result.Meta[wire.MetaReplayed], &replayed); err != nil {
			return 0, false, fmt.Errorf("%w: a result without its replayed flag: %.200q", errBadMCPAnswer, body)
		}
	}
	if a.Result.IsError {
		return StatusMCPIsError, replayed, nil
	}
	return http.StatusOK, replayed, nil
}

// Close releases what the load holds: its idle connections.
func (l *Load) Close() error {
	l.cfg.Client.CloseIdleConnections()
	return nil
}
