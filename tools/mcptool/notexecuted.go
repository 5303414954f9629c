package mcptool

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/wire"
)

// rpcNotExecuted reports whether a JSON-RPC error the server answered
// proves that the tool did not run: one of JSON-RPC 2.0's protocol
// refusals (parse error, invalid request, method not found, invalid
// params: the server rejected the message before any tool ran), or one whose
// data carries _meta {wire.MetaOutcome: wire.OutcomeNotExecuted}. Any
// other error may follow an effect (the tool acted, then failed).
func rpcNotExecuted(e *jsonrpc.Error) bool {
	switch e.Code {
	case jsonrpc.CodeParseError, jsonrpc.CodeInvalidRequest, jsonrpc.CodeMethodNotFound, jsonrpc.CodeInvalidParams:
		return true
	}
	if len(e.Data) == 0 {
		return false
	}
	var data struct {
		Meta mcp.Meta `json:"_meta"`
	}
	if json.Unmarshal(e.Data, &data) != nil {
		return false
	}
	return metaNotExecuted(data.Meta)
}

// metaNotExecuted reports whether an upstream's _meta marks its answer as
// not executed.
func metaNotExecuted(meta mcp.Meta) bool {
	v, _ := meta[wire.MetaOutcome].(string)
	return v == wire.OutcomeNotExecuted
}
