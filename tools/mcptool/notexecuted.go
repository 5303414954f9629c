package mcptool

import (
	"bytes"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/wire"
)

// rpcNotExecuted reports whether a JSON-RPC error the server answered
// proves that the tool did not run: one of JSON-RPC 2.0's protocol
// refusals (parse error, invalid request, method not found, invalid
// params: the server rejected the message before any tool ran), or one whose
// data carries _meta {wire.MetaOutcome: wire.OutcomeNotExecuted}, each
// member once (uniqueMember). Any other error may follow an effect (the
// tool acted, then failed).
func rpcNotExecuted(e *jsonrpc.Error) bool {
	switch e.Code {
	case jsonrpc.CodeParseError, jsonrpc.CodeInvalidRequest, jsonrpc.CodeMethodNotFound, jsonrpc.CodeInvalidParams:
		return true
	}
	meta, ok := uniqueMember(e.Data, "_meta")
	if !ok {
		return false
	}
	outcome, ok := uniqueMember(meta, wire.MetaOutcome)
	if !ok {
		return false
	}
	var v string
	return json.Unmarshal(outcome, &v) == nil && v == wire.OutcomeNotExecuted
}

// uniqueMember is the value of the member name of the JSON object raw,
// when raw is an object holding that member exactly once. A name given
// twice is contradictory evidence (a decoder keeps one of the two, and
// which one is its choice): no value.
func uniqueMember(raw json.RawMessage, name string) (json.RawMessage, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	var found json.RawMessage
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil, false
		}
		if key, _ := tok.(string); key == name {
			if found != nil {
				return nil, false
			}
			found = value
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, false // not a whole object
	}
	return found, found != nil
}

// metaNotExecuted reports whether an upstream's _meta, as go-sdk decoded
// it, marks its answer as not executed.
func metaNotExecuted(meta mcp.Meta) bool {
	v, _ := meta[wire.MetaOutcome].(string)
	return v == wire.OutcomeNotExecuted
}
