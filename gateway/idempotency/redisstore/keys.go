package redisstore

import (
	"crypto/sha1"
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
//	<prefix>R{tag}<scope>        Cluster: record (string: the packed record, see record.go)
//	<prefix>R<scope>             single Redis: record (no tag: there are no slots)
//	<prefix>S{HS(tenant,session)}<step index>  step guard entry: the holder's execution id and tool
//	<prefix>P{H(tenant,tool,key)}              Cluster only: set of record key names of the scope
//	<prefix>A{H(approval id)}<approval id>     approval index → record key name (approvals.go)
//	<prefix>C<record name after R>             hash: budget bucket key names the record charged → its created µs (budget.lua)
//	<prefix>G<record name after R>             a COMPLETED record's kept canonical arguments (keptargs.go)
//	<prefix>B{<bucket>}                        budget bucket (hash: <record key>|<created µs> → "cost:at µs"; "=" → running total)
//	<prefix>O{outbox}  receipt outbox (hash: execution id → entry, outbox.go);
//	                   on Cluster one per record tag, <prefix>O{tag}
//
// <scope> is the scope, packed so that the key name alone names the record
// exactly: uvarint length + tenant, uvarint length + tool, then the key
// packed by packID (a 64-hex key is stored as 32 raw bytes). Nothing the
// name holds is repeated in the value, and the name is the check: two
// scopes never share a record name, whatever the hash tags do.
//
// On Redis Cluster, tag is HS(tenant, session) for a request whose key is
// bound to its step, so a record and its session's step entries share a
// slot and one script decides on both; otherwise tag is H(tenant, tool,
// key). The pointer set lets Get and Delete, which know only the scope,
// find a record that lives under a session tag. A single Redis has no
// slots to respect, so there every record is found by its scope alone and
// no pointer is needed: a retry that names another session still meets
// its record. Nor is a tag needed there: it would only repeat the scope
// the name holds, and its 18 bytes take a common record's name (sds) up a
// jemalloc size class (64 → 80 bytes per record).
//
// H is 16 hex characters of SHA-256 of the newline-joined parts (tag), HS
// 16 of SHA-1 of tenant and packed session (sessionTag: the scripts
// rebuild step names with it). A tag keeps user input ('{', '}' in
// sessions and keys) out of the slot computation: the first '{' of the
// name opens the tag, and the bytes after its '}' may be any.
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
		return appendSessionTag(b, scope.Tenant, step.SessionID)
	}
	return appendTag(b, scope.Tenant, scope.Tool, scope.Key)
}

// record returns the record key of scope as claimed with step (nil: none).
func (k keyLayout) record(scope idempotency.Scope, step *idempotency.Step) string {
	b := make([]byte, 0, len(k.prefix)+tagLen+len(scope.Tenant)+len(scope.Tool)+len(scope.Key)+8)
	b = append(b, k.prefix...)
	if k.sessionSlots {
		b = append(b, "R{"...)
		b = k.appendRecordTag(b, scope, step)
		b = append(b, '}')
	} else {
		b = append(b, 'R')
	}
	b = appendScopeHead(b, scope.Tenant, scope.Tool)
	b = appendPackedID(b, scope.Key)
	return string(b)
}

// appendScopeHead appends the start of a record name's scope to b:
// uvarint length + tenant, then (when tool is not empty) uvarint length +
// tool.
func appendScopeHead(b []byte, tenant, tool string) []byte {
	b = binary.AppendUvarint(b, uint64(len(tenant)))
	b = append(b, tenant...)
	if tool != "" {
		b = binary.AppendUvarint(b, uint64(len(tool)))
		b = append(b, tool...)
	}
	return b
}

// recordPatternHead is the SCAN pattern of a record name up to its scope:
// the prefix, "R" and, on a cluster, any tag.
func (k keyLayout) recordPatternHead() string {
	if k.sessionSlots {
		return globEscape(k.prefix) + "R{" + strings.Repeat("?", tagLen) + "}"
	}
	return globEscape(k.prefix) + "R"
}

// recordPattern is the SCAN pattern of the record keys.
func (k keyLayout) recordPattern() string { return k.recordPatternHead() + "*" }

var errNotRecordName = errors.New("not a record key name")

// parseRecord returns the scope a record key name holds.
func (k keyLayout) parseRecord(name string) (idempotency.Scope, error) {
	rest, ok := strings.CutPrefix(name, k.prefix+"R")
	if ok && k.sessionSlots {
		ok = len(rest) >= tagLen+2 && rest[0] == '{' && rest[tagLen+1] == '}'
		if ok {
			rest = rest[tagLen+2:]
		}
	}
	if !ok {
		return idempotency.Scope{}, errNotRecordName
	}
	tenant, rest, ok1 := cutLenPrefixed(rest)
	tool, rest, ok2 := cutLenPrefixed(rest)
	key, ok3 := unpackID(rest)
	if !ok1 || !ok2 || !ok3 {
		return idempotency.Scope{}, errNotRecordName
	}
	return idempotency.Scope{Tenant: tenant, Tool: tool, Key: key}, nil
}

// cutLenPrefixed cuts one uvarint-length-prefixed field (as
// appendScopeHead and effect holders write them) off the front of s;
// false when s does not start with a whole one.
func cutLenPrefixed(s string) (field, rest string, ok bool) {
	var head [binary.MaxVarintLen64]byte
	n, w := binary.Uvarint(head[:copy(head[:], s)])
	if w <= 0 || uint64(len(s)-w) < n {
		return "", s, false
	}
	return s[w : w+int(n)], s[w+int(n):], true
}

// outbox returns the receipt outbox key of the record of scope claimed
// with step: one key on a single Redis, the record's own tag on a
// Cluster, so complete.lua writes it in the record's slot.
func (k keyLayout) outbox(scope idempotency.Scope, step *idempotency.Step) string {
	if !k.sessionSlots {
		return k.prefix + "O{outbox}"
	}
	b := append([]byte(k.prefix), "O{"...)
	b = k.appendRecordTag(b, scope, step)
	return string(append(b, '}'))
}

// outboxPattern is the SCAN pattern of the outbox keys.
func (k keyLayout) outboxPattern() string { return globEscape(k.prefix) + "O{*" }

// step returns the step key of tenant + session + index.
func (k keyLayout) step(tenant string, step idempotency.Step) string {
	b := make([]byte, 0, len(k.prefix)+tagLen+24)
	b = append(b, k.stepHead()...)
	b = appendSessionTag(b, tenant, step.SessionID)
	b = append(b, '}')
	return string(strconv.AppendUint(b, step.Index, 10))
}

// stepHead is what every step key name starts with.
func (k keyLayout) stepHead() string { return k.prefix + "S{" }

// sessionTag is HS(tenant, session): 16 hex characters of SHA-1 of the
// tenant, a newline and the packed session id (packID). A record keeps
// only its session and step index, not its step key's name: the scripts
// rebuild the name (held_step in them) with redis.sha1hex, the one hash
// their Lua has. The tag is a name, not a secret: SHA-1 spreads it as
// well as SHA-256 would.
func sessionTag(tenant, session string) string {
	return string(appendSessionTag(nil, tenant, session))
}

// appendSessionTag appends sessionTag(tenant, session) to b, hashing from
// a stack buffer (as appendTag does): no allocation but b's growth.
func appendSessionTag(b []byte, tenant, session string) []byte {
	var stack [256]byte
	joined := append(stack[:0], tenant...)
	joined = append(joined, '\n')
	joined = appendPackedID(joined, session)
	sum := sha1.Sum(joined)
	var hexSum [tagLen]byte
	hex.Encode(hexSum[:], sum[:tagLen/2])
	return append(b, hexSum[:]...)
}

// stepArgs are the ARGV a script needs to name the step entry its record
// holds (held_step in the scripts): the step keys' head and the record's
// tenant. Every script that changes a record's life embeds them last.
type stepArgs struct {
	StepHead string `lua:"step_head"` // <prefix>S{
	Tenant   string `lua:"tenant"`    // the record's tenant
}

func (k keyLayout) stepArgs(tenant string) stepArgs {
	return stepArgs{StepHead: k.stepHead(), Tenant: tenant}
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
		hi := strings.IndexByte(lowerHexDigits, s[2*i])
		lo := strings.IndexByte(lowerHexDigits, s[2*i+1])
		if hi < 0 || lo < 0 {
			return false
		}
		dst[i] = byte(hi<<4 | lo)
	}
	return true
}

// lowerHexDigits are the digits decodeLowerHex accepts, at their values.
const lowerHexDigits = "0123456789abcdef"

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
