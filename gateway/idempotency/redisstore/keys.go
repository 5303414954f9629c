package redisstore

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// keyLayout names the store's keys.
//
//	<prefix>r:{tag}:<tool>:<key>          record (hash)
//	<prefix>s:{tag}:<step index>          step guard entry → record key name
//	<prefix>p:{scopeTag}:<tool>:<key>     set of record key names holding the scope
//
// On Redis Cluster, tag is hash(tenant, session) for a request with a step,
// so a record and its session's step entries share a slot and one script
// can decide on both; without a step it is scopeTag = hash(tenant, tool,
// key). The pointer set lets Get and Delete, which know only the scope, find
// a record that lives under a session tag.
//
// A single Redis has no slots to respect, so there every record lives under
// its scopeTag: the record of a scope is then found whatever session a
// request names (an opaque-mode client that resends a key with other
// Agent-* headers still meets its record), and no pointer is needed. Hashing keeps the user-controlled
// session ids and keys (which may contain '{', '}' or ':') out of the slot
// computation; the full values are stored in the record and checked.
type keyLayout struct {
	prefix string
	// sessionSlots puts records with a step under their session's tag
	// (Redis Cluster).
	sessionSlots bool
}

// tag returns a Redis Cluster hash tag: 16 hex chars of SHA-256 over the
// newline-joined parts.
func tag(parts ...string) string {
	h := sha256.New()
	for i, part := range parts {
		if i > 0 {
			h.Write([]byte{'\n'})
		}
		h.Write([]byte(part))
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func (k keyLayout) scopeTag(scope idempotency.Scope) string {
	return tag(scope.Tenant, scope.Tool, scope.Key)
}

// record returns the record key of scope as claimed with step (nil: none).
func (k keyLayout) record(scope idempotency.Scope, step *idempotency.Step) string {
	t := k.scopeTag(scope)
	if k.usesPointer(step) {
		t = tag(scope.Tenant, step.SessionID)
	}
	return k.prefix + "r:{" + t + "}:" + scope.Tool + ":" + scope.Key
}

// step returns the step key of tenant + session + index.
func (k keyLayout) step(tenant string, step idempotency.Step) string {
	return k.prefix + "s:{" + tag(tenant, step.SessionID) + "}:" + strconv.FormatUint(step.Index, 10)
}

// pointer returns the key of the set of record keys that hold scope.
func (k keyLayout) pointer(scope idempotency.Scope) string {
	return k.prefix + "p:{" + k.scopeTag(scope) + "}:" + scope.Tool + ":" + scope.Key
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
