package gateway

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// One pass over a tools/call message for the fast path: the JSON has been
// checked valid (json.Valid) by the guard, so the scanner only splits
// objects into members and values, without decoding or allocating for the
// values. It is deliberately narrow: a member name with an escape, a name
// given twice, or any member the fast path does not know makes it give
// up, and the guard then reads the message its own way (and refuses what
// it refuses). What it accepts, the guard would accept the same way.

// fastMessage is a tools/call read by scanToolsCall.
type fastMessage struct {
	id        json.RawMessage
	name      string
	arguments json.RawMessage
	env       mcpEnvelope
}

// scanToolsCall reads body as a tools/call request of the plain shape:
// members jsonrpc ("2.0"), id (checkRequestID's rules), method
// ("tools/call") and params, each once; params with name (a string),
// arguments (an object, or absent) and _meta (an object, or absent), each
// once; _meta's member names each once. It reports false for anything
// else.
func scanToolsCall(body []byte) (*fastMessage, bool) {
	msg := &fastMessage{}
	var hasVersion, hasMethod, hasID bool
	var params []byte
	ok := scanObject(body, func(name string, value []byte) bool {
		switch name {
		case "jsonrpc":
			hasVersion = string(value) == `"2.0"`
			return hasVersion
		case "id":
			hasID = checkRequestID(value) == nil
			msg.id = value
			return hasID
		case "method":
			hasMethod = string(value) == `"tools/call"`
			return hasMethod
		case "params":
			params = value
			return len(value) > 0 && value[0] == '{'
		}
		return false
	})
	if !ok || !hasVersion || !hasID || !hasMethod || params == nil {
		return nil, false
	}
	named := false
	ok = scanObject(params, func(member string, value []byte) bool {
		switch member {
		case "name":
			named = len(value) > 0 && value[0] == '"' && json.Unmarshal(value, &msg.name) == nil
			return named
		case "arguments":
			msg.arguments = value
			msg.env.argumentBytes = len(value)
			return value[0] == '{'
		case "_meta":
			if value[0] != '{' {
				return false
			}
			msg.env.meta = make(map[string]json.RawMessage, 8)
			return scanObject(value, func(name string, v []byte) bool {
				msg.env.meta[name] = v
				return true
			})
		}
		return false
	})
	return msg, ok && named
}

// scanObject calls fn with each member of the JSON object text (valid
// JSON), and reports false, stopping, when fn does, when a member name has
// an escape (the guard compares names decoded) or comes twice, or when
// object is not an object.
func scanObject(object []byte, fn func(name string, value []byte) bool) bool {
	i := skipSpace(object, 0)
	if i >= len(object) || object[i] != '{' {
		return false
	}
	i = skipSpace(object, i+1)
	if i < len(object) && object[i] == '}' {
		return true
	}
	var seen [16]string
	count := 0
	for i < len(object) {
		if object[i] != '"' {
			return false
		}
		end := bytes.IndexByte(object[i+1:], '"')
		if end < 0 {
			return false
		}
		rawName := object[i+1 : i+1+end]
		if bytes.IndexByte(rawName, '\\') >= 0 {
			return false
		}
		name := string(rawName)
		for _, s := range seen[:min(count, len(seen))] {
			if s == name {
				return false
			}
		}
		if count >= len(seen) {
			return false // more members than the fast path reads anyway
		}
		seen[count] = name
		count++
		i = skipSpace(object, i+2+end)
		if i >= len(object) || object[i] != ':' {
			return false
		}
		i = skipSpace(object, i+1)
		valueEnd, ok := skipValue(object, i)
		if !ok || !fn(name, object[i:valueEnd]) {
			return false
		}
		i = skipSpace(object, valueEnd)
		if i >= len(object) {
			return false
		}
		switch object[i] {
		case ',':
			i = skipSpace(object, i+1)
		case '}':
			return true
		default:
			return false
		}
	}
	return false
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the index just after the JSON value (valid JSON) that
// starts at i.
func skipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	switch b[i] {
	case '"':
		end, ok := skipString(b, i)
		return end, ok
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				end, ok := skipString(b, i)
				if !ok {
					return i, false
				}
				i = end
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			}
			i++
		}
		return i, false
	}
	// A number, true, false or null: up to the next delimiter.
	start := i
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
		i++
	}
	return i, i > start
}

// skipString returns the index just after the JSON string starting at i.
func skipString(b []byte, i int) (int, bool) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1, true
		}
	}
	return len(b), false
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
