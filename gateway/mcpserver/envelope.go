package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
)

// The strict envelope of POST /mcp (contract section 9): the guard reads
// the message once, before go-sdk, and refuses what go-sdk would read
// leniently: duplicate member names in the envelope, in params or in
// params._meta (a proxy reading the first "name" would see another tool
// than the gateway runs), a request id that would not come back as sent,
// and tools/call arguments above the REST limit. The raw _meta it keeps
// is what the identity is read from (a step index 3.0 is told from 3).

// mcpEnvelope is what the guard read from one JSON-RPC message.
type mcpEnvelope struct {
	// meta is params._meta, each member's raw JSON; nil when absent.
	meta map[string]json.RawMessage
	// argumentBytes is the size of params.arguments as sent (0 when absent).
	argumentBytes int
}

// envelopeError says why a message is not a request the server reads.
type envelopeError struct{ detail string }

func (e *envelopeError) Error() string { return e.detail }

// maxJSONRPCID is the largest request id magnitude every JSON number
// reader keeps exactly (2^53−1), so the response id equals the request's.
const maxJSONRPCID = 1<<53 - 1

// readEnvelope checks one JSON object message (already known to be valid
// JSON): no member name twice in the envelope, params or params._meta; an
// id, when present, a string or an integer within ±(2^53−1).
func readEnvelope(body []byte) (*mcpEnvelope, error) {
	env := &mcpEnvelope{}
	err := eachMember(body, func(name string, value json.RawMessage) error {
		switch name {
		case "id":
			return checkRequestID(value)
		case "params":
			return readParams(env, value)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return env, nil
}

// readParams checks params (when an object) and keeps its _meta.
func readParams(env *mcpEnvelope, params json.RawMessage) error {
	if !isObjectText(params) {
		return nil // go-sdk refuses params that are not an object
	}
	return eachMember(params, func(name string, value json.RawMessage) error {
		switch name {
		case "arguments":
			env.argumentBytes = len(value)
		case "_meta":
			if !isObjectText(value) {
				return nil
			}
			env.meta = make(map[string]json.RawMessage)
			return eachMember(value, func(name string, value json.RawMessage) error {
				env.meta[name] = value
				return nil
			})
		}
		return nil
	})
}

// checkRequestID accepts a JSON string (of at most maxEcho bytes as sent),
// or an integer literal (no fraction, no exponent) within ±(2^53−1), but
// -0: go-sdk reads every id number as an integer, so -0 would come back
// as 0, not as sent.
func checkRequestID(raw json.RawMessage) error {
	text := bytes.TrimSpace(raw)
	if len(text) > 0 && text[0] == '"' {
		if len(text) > maxEcho {
			// Every answer repeats the id; an error repeats at most
			// maxEcho bytes of the request.
			return &envelopeError{"a string request id may be at most " + strconv.Itoa(maxEcho) + " bytes"}
		}
		return nil
	}
	digits := text
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) > 0 && len(digits) <= 16 && bytes.IndexFunc(digits, func(r rune) bool { return r < '0' || r > '9' }) < 0 {
		if n, err := strconv.ParseUint(string(digits), 10, 64); err == nil && n <= maxJSONRPCID && (n != 0 || len(digits) == len(text)) {
			return nil
		}
	}
	return &envelopeError{"the request id must be a string or an integer within ±(2^53-1), not -0"}
}

// eachMember calls fn with each member of the JSON object text and
// refuses a name given twice. Names are compared decoded ("a" and "\u0061"
// are the same name). The text must be valid JSON (the guard checked the
// whole message with json.Valid), so the scan only finds boundaries: the
// values are slices of the message, never copies (arguments of a megabyte
// are not copied to be skipped).
func eachMember(object []byte, fn func(name string, value json.RawMessage) error) error {
	i := skipSpace(object, 0)
	if i >= len(object) || object[i] != '{' {
		return &envelopeError{"the message is not a JSON object"}
	}
	var seen []string
	for i = skipSpace(object, i+1); i < len(object) && object[i] != '}'; i = skipSpace(object, i) {
		if object[i] == ',' {
			i = skipSpace(object, i+1)
		}
		nameEnd := skipString(object, i)
		name, err := memberName(object[i:nameEnd])
		if err != nil {
			return err
		}
		if slices.Contains(seen, name) {
			return &envelopeError{"member " + strconv.Quote(truncateEcho(name)) + " is given twice"}
		}
		seen = append(seen, name)
		start := skipSpace(object, skipSpace(object, nameEnd)+1) // past the ':'
		end := skipValue(object, start)
		if err := fn(name, object[start:end:end]); err != nil {
			return err
		}
		i = end
	}
	return nil
}

// memberName decodes a member name (a JSON string with its quotes).
func memberName(raw []byte) (string, error) {
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1]), nil
	}
	var name string
	if err := json.Unmarshal(raw, &name); err != nil {
		return "", &envelopeError{"the message is not valid JSON"}
	}
	return name, nil
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON white space.
func skipSpace(text []byte, i int) int {
	for i < len(text) && (text[i] == ' ' || text[i] == '\t' || text[i] == '\r' || text[i] == '\n') {
		i++
	}
	return i
}

// skipString returns the index just past the JSON string starting at i.
func skipString(text []byte, i int) int {
	for i++; i < len(text); i++ {
		switch text[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(text)
}

// skipValue returns the index just past the JSON value starting at i.
func skipValue(text []byte, i int) int {
	switch {
	case i >= len(text):
		return i
	case text[i] == '"':
		return skipString(text, i)
	case text[i] == '{' || text[i] == '[':
		depth := 0
		for i < len(text) {
			switch text[i] {
			case '"':
				i = skipString(text, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	for i < len(text) && !strings.ContainsRune(",}] \t\r\n", rune(text[i])) {
		i++
	}
	return i
}

// maxEcho is the most of a request an error may repeat.
const maxEcho = 256

// truncateEcho cuts text taken from a request to maxEcho bytes (at a
// UTF-8 boundary), marking the cut.
func truncateEcho(text string) string {
	if len(text) <= maxEcho {
		return text
	}
	cut := maxEcho
	for cut > 0 && text[cut]&0xC0 == 0x80 {
		cut--
	}
	return text[:cut] + "…"
}

// envelopeKey carries the guard's mcpEnvelope to the tools/call handler.
type envelopeKey struct{}

// withEnvelope returns ctx carrying env.
func withEnvelope(ctx context.Context, env *mcpEnvelope) context.Context {
	return context.WithValue(ctx, envelopeKey{}, env)
}

// envelopeFrom returns the guard's envelope of the request (nil outside
// the guard).
func envelopeFrom(ctx context.Context) *mcpEnvelope {
	env, _ := ctx.Value(envelopeKey{}).(*mcpEnvelope)
	return env
}
