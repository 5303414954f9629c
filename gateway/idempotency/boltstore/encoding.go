package boltstore

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// Bucket names.
var (
	// recordsBucket maps a scope key to an encoded storedRecord.
	recordsBucket = []byte("records")
	// stepsBucket maps a step key to the scope key of the record that holds
	// the step.
	stepsBucket = []byte("steps")
	// fencingBucket maps a scope key to the last fencing token handed out
	// for that scope (8 bytes, big endian), so tokens keep growing after the
	// record is deleted.
	fencingBucket = []byte("fencing")
	// effectsBucket maps an effect key (effectKey) to the scope key of
	// the record that claimed it (effects.go).
	effectsBucket = []byte("effects")
	// budgetsBucket maps a budget bucket (idempotency.Charge.Bucket) to
	// its reservations (budgets.go).
	budgetsBucket = []byte("budgets")
)

// joinKey encodes parts as length-prefixed strings: unambiguous whatever
// bytes the parts contain.
func joinKey(parts ...string) []byte {
	size := 0
	for _, p := range parts {
		size += binary.MaxVarintLen64 + len(p)
	}
	out := make([]byte, 0, size)
	for _, p := range parts {
		out = binary.AppendUvarint(out, uint64(len(p)))
		out = append(out, p...)
	}
	return out
}

func scopeKey(scope idempotency.Scope) []byte {
	return joinKey(scope.Tenant, scope.Tool, scope.Key)
}

// stepKey scopes a step by tenant: two tenants' agents may share a session id.
func stepKey(tenant string, step idempotency.Step) []byte {
	return joinKey(tenant, step.SessionID, strconv.FormatUint(step.Index, 10))
}

// storedStep is the step a record holds.
type storedStep struct {
	SessionID string `json:"s"`
	Index     uint64 `json:"i"`
}

// storedResponse is a COMPLETED record's response. Body is base64 in JSON,
// which keeps arbitrary (non-UTF-8) bytes exact.
type storedResponse struct {
	Status      int    `json:"st"`
	ContentType string `json:"ct"`
	Body        []byte `json:"b"`
}

// storedRecord is the value in recordsBucket. Times are Unix nanoseconds.
type storedRecord struct {
	Tenant      string          `json:"tn"`
	Tool        string          `json:"tl"`
	Key         string          `json:"k"`
	State       string          `json:"st"`
	Fingerprint string          `json:"fp"`
	ExecutionID string          `json:"x"`
	Owner       string          `json:"o,omitempty"`
	Fencing     int64           `json:"f"`
	CreatedAt   int64           `json:"c"`
	ExpiresAt   int64           `json:"e"`
	LeaseUntil  int64           `json:"l,omitempty"`
	ReplayTTL   int64           `json:"r,omitempty"` // IN_PROGRESS: added to the lease to get ExpiresAt
	Step        *storedStep     `json:"sp,omitempty"`
	Response    *storedResponse `json:"rs,omitempty"`
	// Arguments are the claim's canonical arguments (JSON text), kept
	// while IN_PROGRESS or UNKNOWN.
	Arguments string `json:"a,omitempty"`
	// Approval is set while the record is an approval (layout 3).
	Approval *storedApproval `json:"ap,omitempty"`
	// Reconcile is the record's reconciliation (reconcile.go).
	Reconcile *storedReconciliation `json:"rc,omitempty"`
	// ResolvedBy is idempotency.ResolvedByReconcile once reconciled.
	ResolvedBy string `json:"rb,omitempty"`
	// Effect is the effect value the record holds (layout 4), "" for none.
	Effect string `json:"ef,omitempty"`
	// Identity is the claim's identity (idempotency.ClaimRequest.Identity).
	Identity string `json:"id,omitempty"`
	// Charges are the budget buckets the record holds a reservation in
	// (layout 5), so releasing the record releases them.
	Charges []string `json:"bg,omitempty"`
	// Requester is the principal id of the call that wrote the record
	// (absent in records written before it: none).
	Requester string `json:"rq,omitempty"`
}

func (r *storedRecord) scope() idempotency.Scope {
	return idempotency.Scope{Tenant: r.Tenant, Tool: r.Tool, Key: r.Key}
}

// expired reports whether the record is gone for every reader.
func (r *storedRecord) expired(now time.Time) bool {
	return now.UnixNano() >= r.ExpiresAt
}

func (r *storedRecord) leaseAlive(now time.Time) bool {
	return now.UnixNano() < r.LeaseUntil
}

// ownedBy reports whether lease is the record's current IN_PROGRESS claim.
func (r *storedRecord) ownedBy(lease idempotency.Lease) bool {
	return idempotency.State(r.State) == idempotency.StateInProgress &&
		r.Owner == lease.Owner && r.Fencing == lease.FencingToken
}

func (r *storedRecord) toRecord() idempotency.Record {
	rec := idempotency.Record{
		Scope:        r.scope(),
		State:        idempotency.State(r.State),
		Fingerprint:  r.Fingerprint,
		ExecutionID:  r.ExecutionID,
		FencingToken: r.Fencing,
		CreatedAt:    time.Unix(0, r.CreatedAt),
		ExpiresAt:    time.Unix(0, r.ExpiresAt),
	}
	if r.LeaseUntil != 0 {
		rec.LeaseExpiresAt = time.Unix(0, r.LeaseUntil)
	}
	if r.Response != nil {
		rec.Response = r.Response.toResponse()
	}
	if r.Step != nil {
		step := stepOf(r.Step)
		rec.Step = &step
	}
	if r.Arguments != "" {
		rec.CanonicalArguments = []byte(r.Arguments)
	}
	if r.Approval != nil {
		rec.Approval = r.Approval.toApproval()
	}
	rec.Reconciliation = r.Reconcile.toReconciliation()
	rec.ResolvedBy = r.ResolvedBy
	rec.Requester = r.Requester
	rec.Identity = r.Identity
	return rec
}

func (r *storedResponse) toResponse() *idempotency.StoredResponse {
	return &idempotency.StoredResponse{
		Status:      r.Status,
		ContentType: r.ContentType,
		Body:        r.Body,
	}
}

func (r *storedRecord) encode() ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode record: %w", err)
	}
	return b, nil
}

// decodeRecord decodes a value read in a transaction. json.Unmarshal copies
// the body out of bbolt's memory map, so the result outlives the transaction.
func decodeRecord(value []byte) (*storedRecord, error) {
	var r storedRecord
	if err := json.Unmarshal(value, &r); err != nil {
		return nil, fmt.Errorf("decode record: %w", err)
	}
	return &r, nil
}

func encodeToken(token int64) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(token))
}

func decodeToken(value []byte) int64 {
	if len(value) != 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(value))
}

// KeepsIdentity: records keep their identity (idempotency.IdentityKeeper).
func (s *Store) KeepsIdentity() bool { return true }
