package gateway

import (
	"math"
	"net/http"

	"github.com/toolgateway/toolgateway/keyderive"
	"github.com/toolgateway/toolgateway/wire"
)

// mcpIdentity reads the identity of a tools/call: each member from the
// request's _meta (under wire.MetaPrefix), else from the HTTP header of
// the POST that carried it. A member given both ways must agree
// (idempotency_metadata_conflict); every value given is format-checked,
// whichever way it came. The members are checked in the REST order (key,
// session, step), so the first bad one decides, as with the headers.
//
// The rules of presence differ from REST in one point, the contract's:
// in derived mode the key is optional (the gateway derives it; one that is
// sent must equal the derived key). noIdentity reports a call that sent
// none of the three, which mcp.allow_unkeyed may run unprotected.
func mcpIdentity(meta map[string]any, h http.Header, mode KeyMode) (id callHeaders, noIdentity bool, p *Problem) {
	key, hasKey, p := mcpIdentityKey(meta, h, mode)
	if p != nil {
		return id, false, p
	}
	session, hasSession, p := mcpIdentitySession(meta, h)
	if p != nil {
		return id, false, p
	}
	step, hasStep, p := mcpIdentityStep(meta, h)
	if p != nil {
		return id, false, p
	}
	if !hasKey && !hasSession && !hasStep {
		noIdentity = true
	}
	switch {
	case !hasKey && mode == KeyModeOpaque:
		return id, noIdentity, newProblem(wire.CodeIdempotencyKeyMissing,
			"send the call's key as _meta \""+wire.MetaIdempotencyKey+"\" (or the Idempotency-Key header)")
	case !hasSession && (mode == KeyModeDerived || hasStep):
		return id, noIdentity, newProblem(wire.CodeAgentSessionMissing,
			"send the agent session as _meta \""+wire.MetaSessionID+"\" (or the Agent-Session-Id header)")
	case !hasStep && (mode == KeyModeDerived || hasSession):
		return id, noIdentity, newProblem(wire.CodeAgentStepMissing,
			"send the step index as _meta \""+wire.MetaStepIndex+"\" (or the Agent-Step-Index header)")
	}
	id.key = key
	if hasSession {
		id.sessionID, id.stepIndex, id.hasStep = session, step, true
	}
	return id, noIdentity, nil
}

// mcpIdentityKey resolves the idempotency key.
func mcpIdentityKey(meta map[string]any, h http.Header, mode KeyMode) (string, bool, *Problem) {
	malformed := func() *Problem {
		detail := "the key must be 1-255 visible ASCII characters"
		if mode == KeyModeDerived {
			detail = "the key must be 64 lowercase hex characters (SHA-256, see docs/keys.md)"
		}
		return newProblem(wire.CodeIdempotencyKeyMalformed, detail)
	}
	fromMeta, inMeta, ok := metaString(meta, wire.MetaIdempotencyKey)
	if inMeta && (!ok || !validKey(fromMeta, mode)) {
		return "", false, malformed()
	}
	fromHeader, inHeader, ok := singleHeader(h, wire.HeaderIdempotencyKey)
	if inHeader {
		var unquoted bool
		fromHeader, unquoted = unquoteKey(fromHeader)
		if !ok || !unquoted || !validKey(fromHeader, mode) {
			return "", false, malformed()
		}
	}
	return agree(fromMeta, inMeta, fromHeader, inHeader, wire.MetaIdempotencyKey, wire.HeaderIdempotencyKey)
}

// mcpIdentitySession resolves the agent session id.
func mcpIdentitySession(meta map[string]any, h http.Header) (string, bool, *Problem) {
	malformed := newProblem(wire.CodeAgentSessionMalformed,
		"the session id must be a string of 1-256 visible ASCII characters without ':'")
	fromMeta, inMeta, ok := metaString(meta, wire.MetaSessionID)
	if inMeta && (!ok || keyderive.ValidateSessionID(fromMeta) != nil) {
		return "", false, malformed
	}
	fromHeader, inHeader, ok := singleHeader(h, wire.HeaderSessionID)
	if inHeader && (!ok || keyderive.ValidateSessionID(fromHeader) != nil) {
		return "", false, malformed
	}
	return agree(fromMeta, inMeta, fromHeader, inHeader, wire.MetaSessionID, wire.HeaderSessionID)
}

// mcpIdentityStep resolves the step index. In _meta it is a JSON number
// with no fractional part in 0…2^53−1, or the same as a decimal string
// (the header's rules: no sign, no leading zeros).
func mcpIdentityStep(meta map[string]any, h http.Header) (uint64, bool, *Problem) {
	malformed := newProblem(wire.CodeAgentStepMalformed,
		"the step index must be an integer 0..2^53-1: a JSON number, or a decimal string without sign or leading zeros")
	var fromMeta uint64
	v, inMeta := meta[wire.MetaStepIndex]
	if v == "" {
		inMeta = false // an empty value counts as missing
	}
	if inMeta {
		index, ok := metaStepIndex(v)
		if !ok {
			return 0, false, malformed
		}
		fromMeta = index
	}
	var fromHeader uint64
	raw, inHeader, ok := singleHeader(h, wire.HeaderStepIndex)
	if inHeader {
		index, err := keyderive.ParseStepIndex(raw)
		if !ok || err != nil {
			return 0, false, malformed
		}
		fromHeader = index
	}
	return agree(fromMeta, inMeta, fromHeader, inHeader, wire.MetaStepIndex, wire.HeaderStepIndex)
}

// metaStepIndex reads a _meta step index. go-sdk decodes _meta numbers as
// float64, exactly as the arguments' numbers are read (IEEE-754 doubles),
// so 7, 7.0 and 7e0 are all step 7, and 2^53 is refused.
func metaStepIndex(v any) (uint64, bool) {
	switch n := v.(type) {
	case float64:
		if n < 0 || n > keyderive.MaxStepIndex || n != math.Trunc(n) {
			return 0, false
		}
		return uint64(n), true
	case string:
		index, err := keyderive.ParseStepIndex(n)
		return index, err == nil
	}
	return 0, false
}

// metaString reads a string member of _meta. present is false when it is
// absent or "" (an empty value counts as missing, as an empty header
// does); ok is false when it is not a string.
func metaString(meta map[string]any, name string) (value string, present, ok bool) {
	v, found := meta[name]
	if !found {
		return "", false, true
	}
	s, isString := v.(string)
	if !isString {
		return "", true, false
	}
	return s, s != "", true
}

// agree returns the member given in _meta or in the header; given both
// ways, the two must be equal.
func agree[T comparable](fromMeta T, inMeta bool, fromHeader T, inHeader bool, metaName, headerName string) (T, bool, *Problem) {
	switch {
	case inMeta && inHeader && fromMeta != fromHeader:
		var zero T
		p := newProblem(wire.CodeIdempotencyMetadataConflict,
			"_meta \""+metaName+"\" and the "+headerName+" header differ; send the identity one way, or the same both ways")
		return zero, false, p
	case inMeta:
		return fromMeta, true, nil
	case inHeader:
		return fromHeader, true, nil
	}
	var zero T
	return zero, false, nil
}
