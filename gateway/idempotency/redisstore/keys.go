package redisstore

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"

	"github.com/oklog/ulid/v2"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// keyLayout names the store's keys.
//
//	<prefix>R{tag}<scope>        record (string: the packed record, see record.go)
//	<prefix>S{H(tenant,session)}<step index>   step guard entry → record key name
//	<prefix>P{H(tenant,tool,key)}              Cluster only: set of record key names of the scope
//	<prefix>A{H(approval id)}<approval id>     approval index → record key name (approvals.go)
//
// <scope> is the scope, packed so that the key name alone names the record
// exactly: uvarint length + tenant, uvarint length + tool, then the key
// packed by packID (a 64-hex key is stored as 32 raw bytes). Nothing the
// name holds is repeated in the value, and the name is the check: two
// scopes never share a record name, whatever the hash tags do.
//
// On Redis Cluster, tag is H(tenant, session) for a request whose key is
// bound to its step, so a record and its session's step entries share a
// slot and one script decides on both; otherwise tag is H(tenant, tool,
// key). The pointer set lets Get and Delete, which know only the scope,
// find a record that lives under a session tag. A single Redis has no
// slots to respect, so there every record lives under its scope tag and no
// pointer is needed: a retry that names another session still meets its
// record.
//
// A tag is 16 hex characters of SHA-256 of the newline-joined parts. It
// keeps user input
// ('{', '}' in sessions and keys) out of the slot computation: the first
// '{' of the name opens the tag, and the bytes after its '}' may be any.
type keyLayout struct {
	prefix string
	// sessionSlots puts records with a step under their session's tag
	// (Redis Cluster).
	sessionSlots bool
}

// tag returns a Redis Cluster hash tag: 16 hex chars of SHA-256 over the
// newline-joined parts.
func tag(parts ...string) string {
	return string(appendTag(nil, parts...))
}

// appendTag appends tag(parts...) to b. Parts of up to a few hundred bytes
// (every tenant, tool, session and key the gateway names) are joined on
// the stack and hashed by sha256.Sum256, so a key name costs no allocation
// but its own: the claim path builds two or three per call.
func appendTag(b []byte, parts ...string) []byte {
	var stack [256]byte
	joined := stack[:0]
	for i, part := range parts {
		if i > 0 {
			joined = append(joined, '\n')
		}
		joined = append(joined, part...)
	}
	sum := sha256.Sum256(joined)
	var hexSum [tagLen]byte
	hex.Encode(hexSum[:], sum[:tagLen/2])
	return append(b, hexSum[:]...)
}

const tagLen = 16

func (k keyLayout) scopeTag(scope idempotency.Scope) string {
	return tag(scope.Tenant, scope.Tool, scope.Key)
}

// appendRecordTag appends the tag of the record of scope as claimed with
// step: its session's on a cluster (usesPointer), its scope's otherwise.
func (k keyLayout) appendRecordTag(b []byte, scope idempotency.Scope, step *idempotency.Step) []byte {
	if k.usesPointer(step) {
		return appendTag(b, scope.Tenant, step.SessionID)
	}
	return appendTag(b, scope.Tenant, scope.Tool, scope.Key)
}

// record returns the record key of scope as claimed with step (nil: none).
func (k keyLayout) record(scope idempotency.Scope, step *idempotency.Step) string {
	b := make([]byte, 0, len(k.prefix)+tagLen+len(scope.Tenant)+len(scope.Tool)+len(scope.Key)+8)
	b = append(b, k.prefix...)
	b = append(b, "R{"...)
	b = k.appendRecordTag(b, scope, step)
	b = append(b, '}')
	b = binary.AppendUvarint(b, uint64(len(scope.Tenant)))
	b = append(b, scope.Tenant...)
	b = binary.AppendUvarint(b, uint64(len(scope.Tool)))
	b = append(b, scope.Tool...)
	b = appendPackedID(b, scope.Key)
	return string(b)
}

// recordPattern is the SCAN pattern of the record keys.
func (k keyLayout) recordPattern() string { return globEscape(k.prefix) + "R{*" }

var errNotRecordName = errors.New("not a record key name")

// parseRecord returns the scope a record key name holds.
func (k keyLayout) parseRecord(name string) (idempotency.Scope, error) {
	rest, ok := strings.CutPrefix(name, k.prefix+"R{")
	if !ok || len(rest) < tagLen+1 || rest[tagLen] != '}' {
		return idempotency.Scope{}, errNotRecordName
	}
	b := []byte(rest[tagLen+1:])
	field := func() (string, bool) {
		n, w := binary.Uvarint(b)
		if w <= 0 || uint64(len(b)-w) < n {
			return "", false
		}
		s := string(b[w : w+int(n)])
		b = b[w+int(n):]
		return s, true
	}
	tenant, ok1 := field()
	tool, ok2 := field()
	key, ok3 := unpackID(string(b))
	if !ok1 || !ok2 || !ok3 {
		return idempotency.Scope{}, errNotRecordName
	}
	return idempotency.Scope{Tenant: tenant, Tool: tool, Key: key}, nil
}

// step returns the step key of tenant + session + index.
func (k keyLayout) step(tenant string, step idempotency.Step) string {
	b := make([]byte, 0, len(k.prefix)+tagLen+24)
	b = append(b, k.prefix...)
	b = append(b, "S{"...)
	b = appendTag(b, tenant, step.SessionID)
	b = append(b, '}')
	return string(strconv.AppendUint(b, step.Index, 10))
}

// pointer returns the key of the set of record keys that hold scope. A
// collision of two scopes' tags only merges their sets: each member's name
// says which scope it holds.
func (k keyLayout) pointer(scope idempotency.Scope) string {
	return k.prefix + "P{" + k.scopeTag(scope) + "}"
}

// slotStep returns the step a claim is keyed and guarded by. On a cluster a
// key not bound to its step (opaque mode) must live by its scope alone, so
// the same key meets its record whatever Agent-* headers a retry carries;
// its step entry would be in another slot, so such a claim has no step
// guard there. A single Redis has no slots and keeps every step.
func (k keyLayout) slotStep(req idempotency.ClaimRequest) *idempotency.Step {
	if k.sessionSlots && !req.StepBoundKey {
		return nil
	}
	return req.Step
}

// usesPointer reports whether a record claimed with step lives under a
// session tag, so that Get and Delete need the pointer set to find it.
func (k keyLayout) usesPointer(step *idempotency.Step) bool {
	return step != nil && k.sessionSlots
}

// packID packs an identifier the gateway mints in a known text form into
// its bytes, tagged so that any other string survives unchanged: a
// canonical ULID (execution ids, owners) becomes 'u' + 16 bytes, a
// lowercase 64-hex SHA-256 (derived keys, fingerprints) 'h' + 32 bytes, a
// lowercase UUID (session ids) 'g' + 16 bytes, anything else 't' + the
// text.
func packID(s string) string {
	var stack [1 + 2*sha256.Size]byte
	return string(appendPackedID(stack[:0], s))
}

// appendPackedID appends packID(s) to b, checking the known forms without
// allocating (the claim packs four or five ids per call).
func appendPackedID(b []byte, s string) []byte {
	switch len(s) {
	case uuidLen:
		var raw [16]byte
		if parseUUIDInto(raw[:], s) {
			return append(append(b, 'g'), raw[:]...)
		}
	case ulid.EncodedSize:
		var text [ulid.EncodedSize]byte
		if id, err := ulid.ParseStrict(s); err == nil && id.MarshalTextTo(text[:]) == nil && string(text[:]) == s {
			return append(append(b, 'u'), id[:]...)
		}
	case 2 * sha256.Size:
		var raw [sha256.Size]byte
		if decodeLowerHex(raw[:], s) {
			return append(append(b, 'h'), raw[:]...)
		}
	}
	return append(append(b, 't'), s...)
}

// decodeLowerHex decodes s, lowercase hex of exactly 2*len(dst) digits,
// into dst; false for anything else (uppercase included: only the
// lowercase spelling survives the way back, unpackID).
func decodeLowerHex[T ~string | ~[]byte](dst []byte, s T) bool {
	if len(s) != 2*len(dst) {
		return false
	}
	for i := range dst {
		hi, ok1 := lowerHexDigit(s[2*i])
		lo, ok2 := lowerHexDigit(s[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

// lowerHexDigit is the value of a lowercase hex digit.
func lowerHexDigit(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// unpackID is the inverse of packID.
func unpackID(p string) (string, bool) {
	if p == "" {
		return "", false
	}
	body := p[1:]
	switch p[0] {
	case 'u':
		var id ulid.ULID
		if len(body) != len(id) {
			return "", false
		}
		copy(id[:], body)
		return id.String(), true
	case 'h':
		if len(body) != sha256.Size {
			return "", false
		}
		var text [2 * sha256.Size]byte
		hex.Encode(text[:], []byte(body))
		return string(text[:]), true
	case 'g':
		if len(body) != 16 {
			return "", false
		}
		return formatUUID([]byte(body)), true
	case 't':
		return body, true
	}
	return "", false
}

const uuidLen = 36

// parseUUIDInto reads a lowercase 8-4-4-4-12 UUID into raw (16 bytes).
func parseUUIDInto(raw []byte, s string) bool {
	if len(s) != uuidLen || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return false
	}
	var digits [32]byte
	h := append(append(append(append(append(digits[:0], s[0:8]...), s[9:13]...), s[14:18]...), s[19:23]...), s[24:]...)
	return decodeLowerHex(raw[:16], h)
}

func formatUUID(b []byte) string {
	var text [uuidLen]byte
	hex.Encode(text[0:8], b[0:4])
	hex.Encode(text[9:13], b[4:6])
	hex.Encode(text[14:18], b[6:8])
	hex.Encode(text[19:23], b[8:10])
	hex.Encode(text[24:], b[10:16])
	text[8], text[13], text[18], text[23] = '-', '-', '-', '-'
	return string(text[:])
}

// globEscape quotes the SCAN MATCH metacharacters of s, byte by byte (s
// may be binary).
func globEscape(s string) string {
	b := make([]byte, 0, len(s)+4)
	for i := range len(s) {
		if strings.IndexByte(`*?[]\`, s[i]) >= 0 {
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return string(b)
}
