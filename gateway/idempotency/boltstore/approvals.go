package boltstore

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

var _ idempotency.Approvals = (*Store)(nil)

// KeepsPrincipals: the store keeps approvals' requesters, quorums,
// bindings and approvers (idempotency.PrincipalKeeper).
func (s *Store) KeepsPrincipals() bool { return true }

// approvalsBucket maps an approval id to the scope key of the record that
// carries it (layout 3). The record is the truth: an entry is followed
// only to a live record carrying that id, and leaves with the record
// (deleteRecord); a consumed approval stays on its record, and so does
// its entry.
var approvalsBucket = []byte("approvals")

// storedApproval is a record's approval. Times are Unix nanoseconds.
type storedApproval struct {
	ID        string `json:"id"`
	Rule      int    `json:"ru,omitempty"`
	Reason    string `json:"re,omitempty"`
	Approver  string `json:"ak,omitempty"`
	Requested int64  `json:"rq"`
	Expires   int64  `json:"ex"`
	UseWithin int64  `json:"uw"`
	By        string `json:"by,omitempty"`
	DecidedAt int64  `json:"da,omitempty"`
	Note      string `json:"no,omitempty"`
	// Requester, Quorum, Binding, ApprovedBy and ClaimedBy: see
	// idempotency.Approval. Records written before them decode with
	// their zero values (no requester, quorum one, no binding).
	Requester  string   `json:"rb,omitempty"`
	Quorum     int      `json:"qu,omitempty"`
	Binding    string   `json:"bi,omitempty"`
	ApprovedBy []string `json:"ab,omitempty"`
	ClaimedBy  string   `json:"cb,omitempty"`
}

func (a *storedApproval) toApproval() *idempotency.Approval {
	out := &idempotency.Approval{
		ID: a.ID, Rule: a.Rule, Reason: a.Reason, Approver: idempotency.Approver(a.Approver),
		RequestedAt: time.Unix(0, a.Requested), ExpiresAt: time.Unix(0, a.Expires),
		UseWithin: time.Duration(a.UseWithin), DecidedBy: a.By, Note: a.Note,
		Requester: a.Requester, Quorum: a.Quorum, Binding: a.Binding,
		ApprovedBy: slices.Clone(a.ApprovedBy), ClaimedBy: a.ClaimedBy,
	}
	if a.DecidedAt != 0 {
		out.DecidedAt = time.Unix(0, a.DecidedAt)
	}
	return out
}

// state is the record's state as readers see it at now: an approval past
// its expiry reads EXPIRED (idempotency.ApprovalState).
func (r *storedRecord) state(now time.Time) idempotency.State {
	if r.Approval == nil {
		return idempotency.State(r.State)
	}
	return idempotency.ApprovalState(idempotency.State(r.State), time.Unix(0, r.Approval.Expires), now)
}

// newPending writes r (fingerprint, step, creation time set by claim) as
// the AWAITING_APPROVAL record of req and indexes its approval. The record
// lives its timeout, then its replay TTL as EXPIRED.
func (t *txn) newPending(key []byte, r *storedRecord, req idempotency.ClaimRequest) (idempotency.Decision, error) {
	a := req.Approval
	expires := t.now.Add(a.Timeout).UnixNano()
	r.State = string(idempotency.StateAwaitingApproval)
	r.ExecutionID = req.ExecutionID
	r.Arguments = string(req.CanonicalArguments)
	r.ReplayTTL = int64(req.ReplayTTL)
	r.ExpiresAt = expires + r.ReplayTTL
	r.Approval = &storedApproval{
		ID: a.ID, Rule: a.Rule, Reason: a.Reason, Approver: string(a.Approver.OrDefault()),
		Requested: t.now.UnixNano(), Expires: expires, UseWithin: int64(a.UseWithin),
		Requester: a.Requester, Quorum: a.Quorum, Binding: a.Binding,
	}
	if err := t.putRecord(key, r); err != nil {
		return idempotency.Decision{}, err
	}
	if err := t.approvals.Put([]byte(a.ID), key); err != nil {
		return idempotency.Decision{}, fmt.Errorf("put approval entry: %w", err)
	}
	return idempotency.Decision{Outcome: idempotency.OutcomeAwaitingApproval, ExecutionID: r.ExecutionID, Approval: r.Approval.toApproval()}, nil
}

// decideApproval is Claim's answer for a record in an approval state (same
// fingerprint): see idempotency.Store.Claim.
func (t *txn) decideApproval(key []byte, r *storedRecord, req idempotency.ClaimRequest) (idempotency.Decision, bool, error) {
	approval := r.Approval.toApproval()
	switch r.state(t.now) {
	case idempotency.StateDenied:
		return idempotency.Decision{Outcome: idempotency.OutcomeApprovalDenied, Approval: approval}, false, nil
	case idempotency.StateExpired:
		return idempotency.Decision{Outcome: idempotency.OutcomeApprovalExpired, Approval: approval}, false, nil
	case idempotency.StateAwaitingApproval:
		if req.Approval != nil {
			return idempotency.Decision{Outcome: idempotency.OutcomeAwaitingApproval, ExecutionID: r.ExecutionID, Approval: approval}, false, nil
		}
	}
	// An approval asked for without the call's effect (the tool's
	// effect_key was configured while it waited) takes the effect now, as
	// a first claim does: held by another record, the call answers as
	// that holder (a replay, in progress, effect_conflict) and keeps its
	// approval unused for its own call (docs/approvals.md).
	if req.Effect != nil && r.Effect != req.Effect.Value {
		if d, held, err := t.effectHeld(key, req); held || err != nil {
			return d, true, err // the holder's decision may have written (a takeover)
		}
		if err := t.freeEffect(key, r); err != nil {
			return idempotency.Decision{}, false, err
		}
		r.Effect = req.Effect.Value
		if err := t.effects.Put(effectKey(req.Scope, req.Effect.Value), key); err != nil {
			return idempotency.Decision{}, false, fmt.Errorf("put effect reservation: %w", err)
		}
	}
	// Approved, or pending under rules that now allow the call: it runs,
	// as a first claim, and the approval is used up. The record keeps it,
	// and its index entry, as history (CONSUMED in the approval views).
	// A human approved the call: it is charged whatever the budget's sum.
	// A pending approval that rules now allowing the call consume is
	// checked like a first claim.
	if len(req.Charges) > 0 {
		over, err := t.reserve(key, r, req, r.Approval.By == "")
		if over != nil || err != nil {
			return idempotency.Decision{Outcome: idempotency.OutcomeBudgetExceeded, Budget: over}, false, err
		}
	}
	decision, err := t.takeLease(key, r, req)
	if err != nil {
		return idempotency.Decision{}, false, err
	}
	decision.Approval = approval
	return decision, true, nil
}

// dropExpiredApproval removes the index entry of an expired record under
// key that the sweeper has not removed yet, before a new record replaces
// it: the entry would otherwise outlive its record.
func (t *txn) dropExpiredApproval(key []byte) error {
	value := t.records.Get(key)
	if value == nil || !bytes.Contains(value, []byte(`"ap":`)) {
		return nil
	}
	r, err := decodeRecord(value)
	if err != nil || r.Approval == nil {
		return err
	}
	if err := t.approvals.Delete([]byte(r.Approval.ID)); err != nil {
		return fmt.Errorf("delete approval entry: %w", err)
	}
	return nil
}

// approvalRecord returns the live record carrying approval id and its
// scope key, or nil.
func (t *txn) approvalRecord(id string) ([]byte, *storedRecord, error) {
	key := t.approvals.Get([]byte(id))
	if key == nil {
		return nil, nil, nil
	}
	key = append([]byte(nil), key...) // outlives the transaction's pages
	r, err := t.liveRecord(key)
	if err != nil || r == nil || r.Approval == nil || r.Approval.ID != id {
		return nil, nil, err
	}
	return key, r, nil
}

// view is a record as readers see it: an approval's state as of now.
func (t *txn) view(r *storedRecord) idempotency.Record {
	rec := r.toRecord()
	rec.State = r.state(t.now)
	return rec
}

// GetApproval returns the live record carrying approval id, as
// idempotency.ApprovalView shows it, or idempotency.ErrNotFound.
func (s *Store) GetApproval(ctx context.Context, id string) (idempotency.Record, error) {
	rec, err := s.viewRecord(ctx, "get approval", func(t *txn) (*storedRecord, error) {
		_, r, err := t.approvalRecord(id)
		return r, err
	})
	return idempotency.ApprovalView(rec), err
}

// ListApprovals lists the records carrying an approval through List's
// scan (key order, bounded work per page).
func (s *Store) ListApprovals(ctx context.Context, filter idempotency.ApprovalFilter) (idempotency.Page, error) {
	if err := filter.Validate(); err != nil {
		return idempotency.Page{}, fmt.Errorf("boltstore: list approvals: %w", err)
	}
	return s.list(ctx, filter.ListFilter(), true)
}

// DecideApproval approves or denies the pending approval id in one write
// transaction.
func (s *Store) DecideApproval(ctx context.Context, id string, decision idempotency.ApprovalDecision) (idempotency.Record, error) {
	if err := decision.Validate(); err != nil {
		return idempotency.Record{}, fmt.Errorf("boltstore: decide approval: %w", err)
	}
	var (
		rec    idempotency.Record
		answer error // not found or not pending: a result, not a failed batch
	)
	err := s.write(ctx, func(t *txn) error {
		rec, answer = idempotency.Record{}, nil
		key, r, err := t.approvalRecord(id)
		if err != nil {
			return err
		}
		if r == nil {
			answer = idempotency.ErrNotFound
			return nil
		}
		if state := idempotency.ApprovalView(t.view(r)).State; state != idempotency.StateAwaitingApproval {
			answer = idempotency.NotPending(state, r.Approval.toApproval())
			return nil
		}
		t.decide(r, decision)
		if err := t.putRecord(key, r); err != nil {
			return err
		}
		rec = t.view(r)
		return nil
	})
	if err == nil {
		err = answer
	}
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("boltstore: decide approval: %w", err)
	}
	return rec, nil
}

// decide writes the decision into the pending record r. An approve adds
// its principal to the approvers (once: the same principal again counts
// nothing) and, with the quorum reached, approves: it may be used within
// its window and lives its replay TTL past that. A deny is final at once:
// the approval keeps its expiry and the record lives its replay TTL.
func (t *txn) decide(r *storedRecord, d idempotency.ApprovalDecision) {
	now := t.now.UnixNano()
	a := r.Approval
	if d.Approve {
		if slices.Contains(a.ApprovedBy, d.By) {
			return
		}
		a.ApprovedBy = append(a.ApprovedBy, d.By)
		if len(a.ApprovedBy) < max(a.Quorum, 1) {
			return
		}
	}
	a.By, a.ClaimedBy, a.Note, a.DecidedAt = d.By, d.ClaimedBy, d.Note, now
	if d.Approve {
		r.State = string(idempotency.StateApproved)
		a.Expires = now + a.UseWithin
		r.ExpiresAt = a.Expires + r.ReplayTTL
	} else {
		r.State = string(idempotency.StateDenied)
		r.ExpiresAt = now + r.ReplayTTL
	}
}
