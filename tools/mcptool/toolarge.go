package mcptool

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/toolgateway/toolgateway/wire"
)

// DefaultMaxResponseBytes caps one message from an MCP server when
// ServerConfig.MaxResponseBytes is 0: the same 4 MiB as an HTTP upstream's
// response.
const DefaultMaxResponseBytes int64 = 4 << 20

// codeResponseTooLarge is the JSON-RPC error code of the answer the
// gateway's own transport puts in place of a message over the cap (its data
// names wire.CodeUpstreamResponseTooLarge, which is what identifies it).
const codeResponseTooLarge = -32099

// tooLargeData is the data of that answer.
type tooLargeData struct {
	Code  string `json:"code"`
	Limit int64  `json:"limit"`
}

// tooLargeResponse is the JSON-RPC error response (one line, no newline)
// that stands in for an oversized message answering the request id (raw
// JSON text).
func tooLargeResponse(id []byte, limit int64) []byte {
	data, _ := json.Marshal(tooLargeData{Code: wire.CodeUpstreamResponseTooLarge, Limit: limit})
	msg, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   jsonrpc.Error   `json:"error"`
	}{"2.0", json.RawMessage(id), jsonrpc.Error{
		Code:    codeResponseTooLarge,
		Message: fmt.Sprintf("the MCP server's message exceeds max_response_bytes (%d bytes); the gateway discarded it", limit),
		Data:    data,
	}})
	return msg
}

// responseTooLarge reports whether err is the stand-in answer of
// tooLargeResponse, and the cap it names.
func responseTooLarge(err error) (int64, bool) {
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != codeResponseTooLarge {
		return 0, false
	}
	var data tooLargeData
	if json.Unmarshal(rpcErr.Data, &data) != nil || data.Code != wire.CodeUpstreamResponseTooLarge {
		return 0, false
	}
	return data.Limit, true
}

// validID reports whether raw is a usable JSON-RPC id: a string or a number.
func validID(raw []byte) bool {
	if len(raw) == 0 {
		return false
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return false
	}
	switch v.(type) {
	case string, float64:
		return true
	}
	return false
}
