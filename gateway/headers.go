package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/toolgateway/toolgateway/keyderive"
	"github.com/toolgateway/toolgateway/wire"
)

// KeyMode says how the gateway treats the Idempotency-Key header.
type KeyMode string

// Key modes.
const (
	// KeyModeDerived requires the key to be derived from the session, step,
	// tool and arguments, and verifies it.
	KeyModeDerived KeyMode = "derived"
	// KeyModeOpaque accepts any 1–255 visible ASCII key from clients that are
	// not agents.
	KeyModeOpaque KeyMode = "opaque"
)

// Validate accepts the two key modes.
func (m KeyMode) Validate() error {
	if m != KeyModeDerived && m != KeyModeOpaque {
		return fmt.Errorf("key mode %q: want derived or opaque", string(m))
	}
	return nil
}

// callHeaders are the parsed key headers of one call.
type callHeaders struct {
	key       string // unquoted
	sessionID string
	stepIndex uint64
	hasStep   bool // session and step were both sent
}

// parseCallHeaders checks the key headers in the contract's order
// (Idempotency-Key, Agent-Session-Id, Agent-Step-Index): the first bad one
// decides the problem.
func parseCallHeaders(h http.Header, mode KeyMode) (callHeaders, *Problem) {
	var out callHeaders

	key, present, ok := singleHeader(h, wire.HeaderIdempotencyKey)
	switch {
	case !present:
		return out, newProblem(wire.CodeIdempotencyKeyMissing, "send the call's Idempotency-Key header")
	case !ok:
		return out, newProblem(wire.CodeIdempotencyKeyMalformed, "send exactly one Idempotency-Key header")
	}
	key, ok = unquoteKey(key)
	if !ok || !validKey(key, mode) {
		detail := "the key must be 1-255 visible ASCII characters"
		if mode == KeyModeDerived {
			detail = "the key must be 64 lowercase hex characters (SHA-256, see docs/keys.md)"
		}
		return out, newProblem(wire.CodeIdempotencyKeyMalformed, detail)
	}
	out.key = key

	session, sessionPresent, ok := singleHeader(h, wire.HeaderSessionID)
	if sessionPresent && (!ok || keyderive.ValidateSessionID(session) != nil) {
		return out, newProblem(wire.CodeAgentSessionMalformed, "the session id must be 1-256 visible ASCII characters without ':'")
	}
	step, stepPresent, ok := singleHeader(h, wire.HeaderStepIndex)
	// Session and step go together: either feeds the step guard only with
	// the other, so one without the other is reported as missing.
	if !sessionPresent && (mode == KeyModeDerived || stepPresent) {
		return out, newProblem(wire.CodeAgentSessionMissing, "send the Agent-Session-Id header")
	}
	if !stepPresent {
		if mode == KeyModeDerived || sessionPresent {
			return out, newProblem(wire.CodeAgentStepMissing, "send the Agent-Step-Index header")
		}
		return out, nil
	}
	index, err := keyderive.ParseStepIndex(step)
	if !ok || err != nil {
		return out, newProblem(wire.CodeAgentStepMalformed, "the step index must be a decimal integer 0..2^53-1 without sign or leading zeros")
	}
	out.sessionID, out.stepIndex, out.hasStep = session, index, true
	return out, nil
}

// requestContentType returns the request's one Content-Type value, or ""
// when it is absent or sent more than once: two media types are ambiguous,
// and the gateway never guesses which one a client meant.
func requestContentType(h http.Header) string {
	v, present, ok := singleHeader(h, "Content-Type")
	if !present || !ok {
		return ""
	}
	return v
}

// optionalStepHeaders returns the Agent-* headers of a call that needs no
// key (a read-only tool): they are handed to the tool only when both are
// present, sent once and well-formed, so a tool never sees a malformed
// session id or step index.
func optionalStepHeaders(h http.Header) (sessionID string, stepIndex uint64, hasStep bool) {
	session, sessionPresent, sessionOK := singleHeader(h, wire.HeaderSessionID)
	step, stepPresent, stepOK := singleHeader(h, wire.HeaderStepIndex)
	if !sessionPresent || !sessionOK || !stepPresent || !stepOK || keyderive.ValidateSessionID(session) != nil {
		return "", 0, false
	}
	index, err := keyderive.ParseStepIndex(step)
	if err != nil {
		return "", 0, false
	}
	return session, index, true
}

// singleHeader returns the header's value; present is false when it is absent
// or empty (an empty header counts as missing), ok is false when it was sent
// more than once.
func singleHeader(h http.Header, name string) (value string, present, ok bool) {
	values := h.Values(name)
	nonEmpty := 0
	for _, v := range values {
		if v != "" {
			nonEmpty++
			value = v
		}
	}
	if nonEmpty == 0 {
		return "", false, true
	}
	return value, true, nonEmpty == 1 && len(values) == 1
}

// unquoteKey unwraps an RFC 8941 sf-string ("..." with \" and \\ escapes).
// An unquoted value is returned as it is.
func unquoteKey(v string) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return v, true
	}
	if v[len(v)-1] != '"' {
		return "", false
	}
	inner := v[1 : len(v)-1]
	if !strings.ContainsAny(inner, `"\`) {
		return inner, true
	}
	var b strings.Builder
	for i := 0; i < len(inner); i++ {
		c := inner[i]
		switch c {
		case '"':
			return "", false // an unescaped quote ends an sf-string early
		case '\\':
			if i+1 >= len(inner) || (inner[i+1] != '"' && inner[i+1] != '\\') {
				return "", false
			}
			i++
			c = inner[i]
		}
		b.WriteByte(c)
	}
	return b.String(), true
}

// validKey checks the unquoted key's format for the mode.
func validKey(key string, mode KeyMode) bool {
	if mode == KeyModeDerived {
		if len(key) != 64 {
			return false
		}
		for i := 0; i < len(key); i++ {
			c := key[i]
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return false
			}
		}
		return true
	}
	if len(key) == 0 || len(key) > 255 {
		return false
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x21 || key[i] > 0x7e {
			return false
		}
	}
	return true
}

// preferWait returns the N of a "Prefer: wait=N" header (RFC 7240), capped
// at maxWait seconds; 0 when absent or malformed.
func preferWait(h http.Header, maxWait int) int {
	for _, line := range h.Values(wire.HeaderPrefer) {
		for _, pref := range strings.Split(line, ",") {
			name, value, found := strings.Cut(strings.TrimSpace(pref), "=")
			if !found || !strings.EqualFold(strings.TrimSpace(name), "wait") {
				continue
			}
			value = strings.Trim(strings.TrimSpace(value), `"`)
			if i := strings.IndexByte(value, ';'); i >= 0 {
				value = value[:i]
			}
			// delta-seconds: digits only; a value too large to parse still
			// means "wait as long as allowed".
			n, err := strconv.ParseUint(value, 10, 64)
			switch {
			case errors.Is(err, strconv.ErrRange):
				return maxWait
			case err != nil || n == 0:
				return 0
			}
			return int(min(n, uint64(maxWait)))
		}
	}
	return 0
}
