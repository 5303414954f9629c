package callpath

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/keyderive"
	"github.com/toolgateway/toolgateway/wire"
)

// The one identity parser: every door (REST headers, MCP _meta with the
// POST's headers as the fallback, a host's own call id over MCP) reads a
// call's identity here, with one presence rule and one set of messages.
//
// Presence (contract sections 1 and 9): session and step go together
// (either one feeds the step guard only with the other, so one without
// the other is reported as the other missing); derived mode requires both;
// the key is required, but for an MCP call in derived mode, where the
// gateway derives it. Order: key, session, step; for each, malformed (or
// given two ways that differ) before missing; the first bad member
// decides, so the same headers give the same problem over REST and MCP.

// identitySource is where one call's identity can come from.
type identitySource struct {
	// api is the door: over MCP the _meta members come first and, in
	// derived mode, the key is optional.
	api    API
	header http.Header
	// meta is params._meta of a tools/call, each value as its raw JSON (so
	// a step index 3.0 is told from 3); nil over REST.
	meta map[string]json.RawMessage
	// hostCall is the host's own id of the call (MCP), for a call that
	// carries none of the gateway's identity.
	hostCall HostCall
}

// parsedIdentity is what parseIdentity read from a call.
type parsedIdentity struct {
	// id is the identity when problem is nil.
	id Identity
	// problem is the first thing wrong, in the contract's order.
	problem *Problem
	// none: the call sent none of key, session and step anywhere, and no
	// host call id either (mcp.allow_unkeyed may run it unprotected).
	none bool
	// session, step: both sent once, well-formed and agreeing, whatever
	// else is wrong. A read-only tool is handed them (REST and MCP alike).
	sessionID string
	stepIndex uint64
	hasStep   bool
}

// parseIdentity reads the call's identity from src; see the top of this
// file for the rules.
func parseIdentity(src identitySource, mode KeyMode) parsedIdentity {
	var out parsedIdentity
	key := identityKey.read(src, func(raw string) (string, bool) { return raw, validKey(raw, mode) }, mode)
	session := identitySession.read(src, func(raw string) (string, bool) {
		return raw, keyderive.ValidateSessionID(raw) == nil
	}, mode)
	step := readMember(identityStep, src, func(raw string) (uint64, bool) {
		index, err := keyderive.ParseStepIndex(raw)
		return index, err == nil
	}, metaStepIndex, mode)
	if session.present && session.problem == nil && step.present && step.problem == nil {
		out.sessionID, out.stepIndex, out.hasStep = session.value, step.value, true
	}
	out.none = !key.present && !session.present && !step.present
	if out.none && src.api == APIMCP {
		if p := src.hostCall.Problem; p != nil {
			out.none, out.problem = false, p
			return out
		}
		if name := src.hostCall.Meta; name != "" {
			out.none = false
			out.id = Identity{HostMeta: name, HostCallID: src.hostCall.ID}
			return out
		}
	}
	keyRequired := mode == KeyModeOpaque || src.api != APIMCP
	stepsRequired := mode == KeyModeDerived
	switch {
	case key.problem != nil:
		out.problem = key.problem
	case !key.present && keyRequired:
		out.problem = identityKey.missing(src)
	case session.problem != nil:
		out.problem = session.problem
	case !session.present && (stepsRequired || step.present):
		out.problem = identitySession.missing(src)
	case step.problem != nil:
		out.problem = step.problem
	case !step.present && (stepsRequired || session.present):
		out.problem = identityStep.missing(src)
	default:
		out.id = Identity{Key: key.value}
		if out.hasStep {
			out.id.SessionID, out.id.StepIndex, out.id.HasStep = out.sessionID, out.stepIndex, true
		}
	}
	return out
}

// applyTo sets the identity fields of c: a read-only tool gets the
// session and step alone (when both are well-formed; nothing else is
// checked, since it needs no identity), a mutating tool the identity or
// the problem.
func (p parsedIdentity) applyTo(c *Call) {
	if c.Entry.Spec.ReadOnly {
		c.Identity = Identity{SessionID: p.sessionID, StepIndex: p.stepIndex, HasStep: p.hasStep}
		if p.problem == nil {
			// Only to find the record of a retired tool that was
			// mutating before (retired.go); a read-only call stores nothing.
			c.Identity.Key = p.id.Key
		}
		return
	}
	c.Identity, c.IdentityProblem, c.NoIdentity = p.id, p.problem, p.none
}

// IdentitySource is where one call's identity can come from, for an
// adapter outside this package: the door, the request's headers and (a
// tools/call over MCP) params._meta with each member's raw JSON, so a
// step index 3.0 is told from 3.
type IdentitySource struct {
	API    API
	Header http.Header
	Meta   map[string]json.RawMessage
	// HostCall is the host's own id of the call, as the MCP door read it;
	// it keys a call carrying none of the gateway's identity.
	HostCall HostCall
}

// ReadIdentity reads c's identity from src under key mode mode with the
// one identity parser (the rules at the top of this file) and sets c's
// Identity, IdentityProblem and NoIdentity; a read-only tool (c.Entry)
// gets its session and step alone.
func ReadIdentity(c *Call, src IdentitySource, mode KeyMode) {
	parsed := parseIdentity(identitySource{api: src.API, header: src.Header, meta: src.Meta, hostCall: src.HostCall}, mode)
	parsed.applyTo(c)
}

// identityMember is one member of the gateway's identity: its names in
// each carrier and its codes. The messages of every carrier are built
// from it, so they say the same thing everywhere.
type identityMember struct {
	header, meta         string
	missingCode, badCode string
	what                 string // "the call's key"
	rule                 func(mode KeyMode) string
}

var (
	identityKey = identityMember{
		header: wire.HeaderIdempotencyKey, meta: wire.MetaIdempotencyKey,
		missingCode: wire.CodeIdempotencyKeyMissing, badCode: wire.CodeIdempotencyKeyMalformed,
		what: "the call's key",
		rule: func(mode KeyMode) string {
			if mode == KeyModeDerived {
				return "the key must be 64 lowercase hex characters (SHA-256, see docs/keys.md)"
			}
			return "the key must be 1-255 visible ASCII characters"
		},
	}
	identitySession = identityMember{
		header: wire.HeaderSessionID, meta: wire.MetaSessionID,
		missingCode: wire.CodeAgentSessionMissing, badCode: wire.CodeAgentSessionMalformed,
		what: "the agent session",
		rule: func(KeyMode) string {
			return "the session id must be a string of 1-256 visible ASCII characters without ':'"
		},
	}
	identityStep = identityMember{
		header: wire.HeaderStepIndex, meta: wire.MetaStepIndex,
		missingCode: wire.CodeAgentStepMissing, badCode: wire.CodeAgentStepMalformed,
		what: "the step index",
		rule: func(KeyMode) string {
			return "the step index must be an integer 0..2^53-1: a decimal string without sign or leading zeros, or in _meta a JSON integer"
		},
	}
)

// missing is the problem of a required member that was not sent.
func (m identityMember) missing(src identitySource) *Problem {
	where := "the " + m.header + " header"
	if src.api == APIMCP {
		where = "_meta \"" + m.meta + "\" (or the " + m.header + " header)"
	}
	return NewProblem(m.missingCode, "send "+m.what+" as "+where)
}

// memberValue is one member as the carriers gave it.
type memberValue[T comparable] struct {
	value T
	// present: given (non-empty) in a carrier, well-formed or not; an
	// empty value counts as missing, as an empty header does.
	present bool
	problem *Problem
}

// read reads a string member (the key, the session).
func (m identityMember) read(src identitySource, parse func(string) (string, bool), mode KeyMode) memberValue[string] {
	return readMember(m, src, parse, nil, mode)
}

// readMember reads one member from _meta (MCP) and the header, each
// format-checked; given both ways, the two must agree. metaNumber, when
// set, parses a JSON number in _meta (the step index).
func readMember[T comparable](m identityMember, src identitySource, parse func(string) (T, bool), metaNumber func(json.RawMessage) (T, bool), mode KeyMode) memberValue[T] {
	var out memberValue[T]
	malformed := func(detail string) memberValue[T] {
		out.present, out.problem = true, NewProblem(m.badCode, detail)
		return out
	}
	var fromMeta T
	inMeta := false
	if raw, found := src.meta[m.meta]; found {
		text, isString := metaStringValue(raw)
		switch {
		case isString && text == "":
			// An empty value counts as missing, as an empty header does.
		case isString:
			v, ok := parse(text)
			if !ok {
				return malformed(m.rule(mode))
			}
			fromMeta, inMeta = v, true
		case metaNumber != nil:
			v, ok := metaNumber(raw)
			if !ok {
				return malformed(m.rule(mode))
			}
			fromMeta, inMeta = v, true
		default:
			return malformed(m.rule(mode))
		}
	}
	var fromHeader T
	inHeader := false
	if text, present, once := singleHeader(src.header, m.header); present {
		if !once {
			return malformed("send exactly one " + m.header + " header")
		}
		if m.header == wire.HeaderIdempotencyKey {
			unquoted, ok := unquoteKey(text)
			if !ok {
				return malformed(m.rule(mode))
			}
			text = unquoted
		}
		v, ok := parse(text)
		if !ok {
			return malformed(m.rule(mode))
		}
		fromHeader, inHeader = v, true
	}
	switch {
	case inMeta && inHeader && fromMeta != fromHeader:
		out.problem = NewProblem(wire.CodeIdempotencyMetadataConflict,
			"_meta \""+m.meta+"\" and the "+m.header+" header differ; send the identity one way, or the same both ways")
	case inMeta:
		out.value, out.present = fromMeta, true
	case inHeader:
		out.value, out.present = fromHeader, true
	}
	return out
}

// MetaString reads a raw _meta value (a trace context, an identity
// member) as a JSON string; false when it is none.
func MetaString(raw json.RawMessage) (string, bool) { return metaStringValue(raw) }

// metaStringValue reads a raw _meta value as a JSON string.
func metaStringValue(raw json.RawMessage) (string, bool) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || trimmed[0] != '"' {
		return "", false
	}
	var s string
	if err := json.Unmarshal(trimmed, &s); err != nil {
		return "", false
	}
	return s, true
}

// metaStepIndex reads a _meta step index given as a JSON number: an
// integer literal 0…2^53−1. A fraction or an exponent (3.0, 3.5, 3e0) is
// malformed, as the contract's strict envelope says: the step is an
// integer, and a number that only equals one is not sent by any client
// that means an integer.
func metaStepIndex(raw json.RawMessage) (uint64, bool) {
	text := string(bytes.TrimSpace(raw))
	if text == "" || strings.ContainsAny(text, ".eE+-") {
		return 0, false
	}
	index, err := keyderive.ParseStepIndex(text)
	return index, err == nil
}

// Host call ids (contract section 9): a host that sends none of the
// gateway's identity may send its own id of the call in _meta, the same
// when the host or its transport replays the call. The MCP door reads it
// (which members, in which order: mcp.host_call_ids) into a HostCall; the
// engine keys the call on it.

// HostCall is a host's own id of a call as the MCP door read it from
// _meta: used only when the call carries none of the gateway's identity.
type HostCall struct {
	// Meta is the _meta member the id came from ("" when none did).
	Meta string
	// ID is the host's id of the call.
	ID string
	// Problem: a member was there but was not a usable id; the host meant
	// to identify the call, so it is refused rather than ignored.
	Problem *Problem
}

// hostCallKey is the key of a host-keyed call:
// lowercase hex SHA-256(<meta name> ":" <id> ":" <tool> ":" JCS(arguments)).
func hostCallKey(name, id, tool string, canonical []byte) string {
	h := sha256.New()
	h.Write([]byte(name + ":" + id + ":" + tool + ":"))
	h.Write(canonical)
	return hex.EncodeToString(h.Sum(nil))
}

// hostCallStep is the store step entry of a host call id: the record of a
// host-keyed call is found by its host id and tool as well as by its key
// (which includes the arguments), so the same host id with other arguments
// meets the earlier record (idempotency_key_reused) instead of running as
// a new call. The step's session is a hash of name, id and tool, prefixed
// "host:"; a ':' is never in an agent's session id, so no REST or MCP
// call with the gateway's identity can reach this entry.
func hostCallStep(name, id, tool string) (sessionID string, index uint64) {
	sum := sha256.Sum256([]byte(name + ":" + id + ":" + tool))
	return wire.MetaIdentityHostPrefix + hex.EncodeToString(sum[:]), 0
}

// Fingerprint keys (contract section 21): a host that sends no identity
// at all (ChatGPT, Claude Desktop, Claude.ai) repeats a call as the same
// tool with the same arguments by the same person, minutes apart
// (regenerate, retry, a connector's replay). Such a call is keyed on
// exactly that, within an aligned window: the same person's same call in
// the same window is one call; in the next window it is a new one. The
// door decides whether a tool is keyed so, and whose principal it is.

// FingerprintIdentity is the identity of an identityless call by the
// person principal at now, in aligned windows of window (the window that
// holds now starts at a multiple of window since the Unix epoch, so every
// replica computes the same start).
func FingerprintIdentity(principal string, window time.Duration, now time.Time) Identity {
	start := now
	if window > 0 {
		n := now.UnixNano()
		start = time.Unix(0, n-n%int64(window)).UTC()
	}
	return Identity{FingerprintPrincipal: principal, WindowStart: start, Window: window}
}

// fingerprintKey is the key of a fingerprint-keyed call: lowercase hex
// SHA-256("fp:" principal ":" tool ":" JCS(arguments) ":" window start),
// the window start in Unix seconds (what every language prints the same
// way).
func fingerprintKey(principal, tool string, canonical []byte, windowStart time.Time) string {
	h := sha256.New()
	h.Write([]byte(wire.FingerprintSessionPrefix + principal + ":" + tool + ":"))
	h.Write(canonical)
	h.Write([]byte(":" + strconv.FormatInt(windowStart.Unix(), 10)))
	return hex.EncodeToString(h.Sum(nil))
}

// recordIdentity is the JSON of id's idempotency.RecordIdentity, for the
// claim: "" for the gateway's own identity, the common case, which the
// record's session and step already say (no bytes stored for it).
func recordIdentity(id Identity) string {
	var out idempotency.RecordIdentity
	switch {
	case id.FingerprintPrincipal != "":
		out = idempotency.RecordIdentity{Kind: idempotency.RecordIdentityFingerprint, Principal: id.FingerprintPrincipal,
			WindowStart: id.WindowStart.UTC().Format(time.RFC3339), Window: id.Window.String()}
	case id.HostMeta != "":
		out = idempotency.RecordIdentity{Kind: idempotency.RecordIdentityHost, HostMeta: id.HostMeta, HostCallID: id.HostCallID}
	default:
		return ""
	}
	raw, _ := json.Marshal(out) // strings only: it cannot fail
	return string(raw)
}

// IdentityLabel is the value of _meta "io.github.toolgateway/identity"
// of a keyed call's result: "gateway", or "host:" and the _meta member
// of the host call id the call was keyed on.
func IdentityLabel(id Identity) string {
	if id.FingerprintPrincipal != "" {
		return wire.MetaIdentityFingerprint
	}
	if id.HostMeta != "" {
		return wire.MetaIdentityHostPrefix + id.HostMeta
	}
	return wire.MetaIdentityGateway
}
