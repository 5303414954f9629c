package mcpserver

import (
	"encoding/json"
	"errors"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// One pass over a tools/call message for the fast path, with the guard's
// scanner, in place of the guard's readEnvelope and go-sdk's decoding of
// the same bytes. It is deliberately narrow: any member the fast path does
// not know makes it give up, and the guard then reads the message its own
// way (and refuses what it refuses). What it accepts, the guard would
// accept the same way.

// fastMessage is a tools/call read by scanToolsCall.
type fastMessage struct {
	id        json.RawMessage
	name      string
	arguments json.RawMessage
	env       mcpEnvelope
}

// errNotFast stops a scan the fast path does not serve.
var errNotFast = errors.New("not a plain tools/call")

// scanToolsCall reads body (valid JSON) with the guard's own member
// scanner (eachMember: names decoded, none twice) as a tools/call request
// of the plain shape: members jsonrpc ("2.0"), id (checkRequestID's
// rules), method ("tools/call") and params, each once; params with name
// (a string), arguments (an object, or absent) and _meta (an object, or
// absent); _meta's member names each once. It reports false for anything
// else, which the guard then reads (and refuses) its own way.
func scanToolsCall(body []byte) (*fastMessage, bool) {
	msg := &fastMessage{}
	var hasVersion, hasMethod, hasID bool
	var params []byte
	err := eachMember(body, func(name string, value json.RawMessage) error {
		ok := false
		switch name {
		case "jsonrpc":
			hasVersion = string(value) == `"2.0"`
			ok = hasVersion
		case "id":
			hasID = checkRequestID(value) == nil
			msg.id, ok = value, hasID
		case "method":
			hasMethod = string(value) == `"tools/call"`
			ok = hasMethod
		case "params":
			params, ok = value, isObjectText(value)
		}
		if !ok {
			return errNotFast
		}
		return nil
	})
	if err != nil || !hasVersion || !hasID || !hasMethod || params == nil {
		return nil, false
	}
	named := false
	err = eachMember(params, func(member string, value json.RawMessage) error {
		ok := false
		switch member {
		case "name":
			named = len(value) > 0 && value[0] == '"' && json.Unmarshal(value, &msg.name) == nil
			ok = named
		case "arguments":
			msg.arguments, msg.env.argumentBytes = value, len(value)
			ok = isObjectText(value)
		case "_meta":
			if isObjectText(value) {
				msg.env.meta = make(map[string]json.RawMessage, 8)
				ok = eachMember(value, func(name string, v json.RawMessage) error {
					msg.env.meta[name] = v
					return nil
				}) == nil
			}
		}
		if !ok {
			return errNotFast
		}
		return nil
	})
	return msg, err == nil && named
}

// fastID turns the request id as sent into go-sdk's ID.
func fastID(raw []byte) (jsonrpc.ID, bool) {
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return jsonrpc.ID{}, false
		}
		id, err := jsonrpc.MakeID(s)
		return id, err == nil
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return jsonrpc.ID{}, false
	}
	id, err := jsonrpc.MakeID(float64(n)) // exact: |n| ≤ 2^53−1 (checkRequestID)
	return id, err == nil
}
