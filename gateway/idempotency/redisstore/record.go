package redisstore

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// The record layout in struct.pack notation, as every script declares it
// at its top (claim.lua documents the fields; TestScriptLayouts holds the
// scripts equal to these).
const (
	// layoutHead is the header every record starts with: state,
	// fingerprint, execution id, fencing token, created, step index, held,
	// session, requester, identity.
	layoutHead = ">c1Bc0Bc0I8I8Bc0BHc0Hc0Hc0"
	// layoutProgress follows the header of an IN_PROGRESS record: owner,
	// lease end (µs), replay ms; the canonical arguments are the rest (an
	// UNKNOWN record keeps them right after its header).
	layoutProgress = ">Bc0I8I8"
	// layoutDone follows the header of a COMPLETED record: status, content
	// type; the body is the rest.
	layoutDone = ">HHc0"
	// layoutStep is a step entry's value: the holder's execution id; its
	// tool is the rest.
	layoutStep = ">Bc0"
	// layoutApproval follows the header of a record in an approval state
	// ('A', 'Y', 'N'): approval id, rule, reason, approver, requested,
	// expires, use-within ms, replay ms, decided by, decided at, note,
	// requester, quorum, binding, approved by (layoutApprover entries),
	// claimed by; the canonical arguments are the rest.
	layoutApproval = ">Bc0I8Hc0Bc0I8I8I8I8Hc0I8Hc0Hc0BHc0I4c0Hc0"
	// layoutHistory starts a record's history key: the record's creation
	// time (µs); the consumed APPROVAL block is the rest.
	layoutHistory = ">I8"
	// layoutApprover is one entry of an approval's approved-by list, in
	// the order they approved.
	layoutApprover = ">Hc0"
)

// packed is a record value as claim.lua lays it out (one string).
type packed struct {
	state    byte // 'P', 'C' or 'U'
	fp, exec string
	fence    int64
	created  int64  // µs
	step     string // the step index, decimal ("" without a step)
	held     bool
	session  string
	// requester is the principal id of the call that wrote the record.
	requester string
	// identity is which identity keyed the call (JSON text, "" for the
	// gateway's own: ClaimRequest.Identity).
	identity string
	lease    int64 // µs, 'P' only
	status   int   // 'C' only
	ctype    string
	body     []byte
	args     []byte                // 'P', 'U' and approvals: the canonical arguments (the rest)
	approval *idempotency.Approval // 'A', 'Y', 'N'
}

// reader walks a packed value; the first error sticks.
type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n > len(r.b) {
		r.err = fmt.Errorf("%w: record value cut short", errBadReply)
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) u8() int {
	b := r.take(1)
	if b == nil {
		return 0
	}
	return int(b[0])
}

func (r *reader) u16() int {
	b := r.take(2)
	if b == nil {
		return 0
	}
	return int(binary.BigEndian.Uint16(b))
}

func (r *reader) u32() uint32 {
	b := r.take(4)
	if b == nil {
		return 0
	}
	return binary.BigEndian.Uint32(b)
}

func (r *reader) u64() int64 {
	b := r.take(8)
	if b == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(b))
}

func (r *reader) str(n int) string { return string(r.take(n)) }

// decodePacked parses a record value.
func decodePacked(v string) (packed, error) {
	r := &reader{b: []byte(v)}
	var p packed
	p.state = byte(r.u8())
	p.fp = r.str(r.u8())
	p.exec = r.str(r.u8())
	p.fence = r.u64()
	p.created = r.u64()
	p.step = r.str(r.u8())
	p.held = r.u8() == 1
	p.session = r.str(r.u16())
	p.requester = r.str(r.u16())
	p.identity = r.str(r.u16())
	switch p.state {
	case 'P':
		r.str(r.u8()) // owner
		p.lease = r.u64()
		r.u64() // replay ms
		p.args = r.b
	case 'C':
		p.status = r.u16()
		p.ctype = r.str(r.u16())
		p.body = r.b
	case 'U':
		p.args = r.b
	case 'A', 'Y', 'N':
		p.approval = readApproval(r)
		p.args = r.b
	default:
		if r.err == nil {
			r.err = fmt.Errorf("%w: record state %q", errBadReply, p.state)
		}
	}
	return p, r.err
}

var packedStates = map[byte]idempotency.State{
	'P': idempotency.StateInProgress, 'C': idempotency.StateCompleted, 'U': idempotency.StateUnknown,
	'A': idempotency.StateAwaitingApproval, 'Y': idempotency.StateApproved, 'N': idempotency.StateDenied,
}

// recordOf turns a packed value of scope into a Record; expires is when
// the key expires (PEXPIRETIME: the value does not repeat it).
func recordOf(scope idempotency.Scope, v string, expires time.Time) (idempotency.Record, error) {
	p, err := decodePacked(v)
	if err != nil {
		return idempotency.Record{}, err
	}
	fp, ok1 := unpackID(p.fp)
	exec, ok2 := unpackID(p.exec)
	session, ok3 := "", true
	if p.session != "" {
		session, ok3 = unpackID(p.session)
	}
	ctype, ok4 := "", true
	if p.state == 'C' {
		ctype, ok4 = unpackCtype(p.ctype)
	}
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return idempotency.Record{}, fmt.Errorf("%w: fingerprint, execution id, session or content type", errBadReply)
	}
	rec := idempotency.Record{
		Scope: scope, State: packedStates[p.state], Fingerprint: fp, ExecutionID: exec,
		FencingToken: p.fence, CreatedAt: time.UnixMicro(p.created), ExpiresAt: expires,
		Requester: p.requester, Identity: p.identity,
	}
	if p.step != "" {
		n, err := strconv.ParseUint(p.step, 10, 64)
		if err != nil {
			return idempotency.Record{}, fmt.Errorf("%w: step index", errBadReply)
		}
		rec.Step = &idempotency.Step{SessionID: session, Index: n}
	}
	switch p.state {
	case 'P':
		rec.LeaseExpiresAt = time.UnixMicro(p.lease)
	case 'C':
		rec.Response = &idempotency.StoredResponse{Status: p.status, ContentType: ctype, Body: p.body}
	}
	if len(p.args) > 0 {
		rec.CanonicalArguments = p.args
	}
	if p.approval != nil {
		if p.approval.ID == "" {
			return idempotency.Record{}, fmt.Errorf("%w: approval id", errBadReply)
		}
		rec.Approval = p.approval
		// The scripts decide on the Redis clock; a read shows expiry on the
		// gateway's (replicas' clocks are assumed close, as for leases
		// shown by the admin API).
		rec.State = idempotency.ApprovalState(rec.State, p.approval.ExpiresAt, time.Now())
	}
	return rec, nil
}

// expiresAt turns PEXPIRETIME's answer into a time (zero: no expiry).
func expiresAt(unix time.Duration) time.Time {
	if unix <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(unix.Milliseconds())
}

// jsonCtype is the content type of nearly every tool response.
const jsonCtype = "application/json"

// packCtype packs a content type: "j" for application/json, else "t" +
// the text (the 16 bytes saved are per record).
func packCtype(ctype string) string {
	if ctype == jsonCtype {
		return "j"
	}
	return "t" + ctype
}

// unpackCtype is the inverse of packCtype.
func unpackCtype(p string) (string, bool) {
	switch {
	case p == "j":
		return jsonCtype, true
	case p != "" && p[0] == 't':
		return p[1:], true
	}
	return "", false
}

// KeepsIdentity: records keep their identity in their header, written by
// claim.lua and copied by every script that rewrites the record
// (idempotency.IdentityKeeper).
func (s *Store) KeepsIdentity() bool { return true }
