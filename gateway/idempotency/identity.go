package idempotency

import (
	"encoding/json"
	"strings"

	"github.com/toolgateway/toolgateway/wire"
)

// RecordIdentity says which identity keyed a call: what the store keeps
// with its record (as JSON, ClaimRequest.Identity) and the admin API, the
// admin command and the console show.
type RecordIdentity struct {
	// Kind is "gateway" (session and step, or a key, of the gateway's),
	// "host" (a host's own call id) or "fingerprint" (the person, the
	// tool, the arguments and the dedupe window).
	Kind string `json:"kind"`
	// HostMeta and HostCallID: the _meta member and its value (host).
	HostMeta   string `json:"host_meta,omitempty"`
	HostCallID string `json:"host_call_id,omitempty"`
	// Principal, WindowStart (RFC 3339, UTC) and Window (a Go duration):
	// the person and the dedupe window the call fell in (fingerprint).
	Principal   string `json:"principal,omitempty"`
	WindowStart string `json:"window_start,omitempty"`
	Window      string `json:"window,omitempty"`
}

// The kinds of RecordIdentity.
const (
	RecordIdentityGateway     = wire.MetaIdentityGateway
	RecordIdentityHost        = wire.RecordIdentityHost
	RecordIdentityFingerprint = wire.MetaIdentityFingerprint
)

// IdentityOfRecord says which identity keyed rec's call: the identity its
// store kept with it, else what its session says: "host:", a host call
// id (without its member and id: a record v0.1.0 wrote, before stores
// kept identities; every store keeps a fingerprint's, which no release
// wrote without it); any other session, or none, the gateway's.
func IdentityOfRecord(rec Record) RecordIdentity {
	var out RecordIdentity
	if rec.Identity != "" && json.Unmarshal([]byte(rec.Identity), &out) == nil && out.Kind != "" {
		return out
	}
	if rec.Step != nil && strings.HasPrefix(rec.Step.SessionID, wire.MetaIdentityHostPrefix) {
		return RecordIdentity{Kind: RecordIdentityHost}
	}
	return RecordIdentity{Kind: RecordIdentityGateway}
}

// String is the identity on one line, for the admin command and the
// console: "fingerprint host-user:… (window 24h0m0s from …)".
func (r RecordIdentity) String() string {
	out := r.Kind
	if r.Principal != "" {
		out += " " + r.Principal
	}
	if r.HostMeta != "" {
		out += " " + r.HostMeta + "=" + r.HostCallID
	}
	if r.Window != "" {
		out += " (window " + r.Window + " from " + r.WindowStart + ")"
	}
	return out
}
