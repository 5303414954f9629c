package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

var _ idempotency.Approvals = (*Store)(nil)

// KeepsPrincipals: the store keeps approvals' requesters, quorums,
// bindings and approvers, and approve.lua counts a quorum
// (idempotency.PrincipalKeeper).
func (s *Store) KeepsPrincipals() bool { return true }

// An approval lives in its call's record (claim.lua: states 'A', 'Y',
// 'N' and the APPROVAL block), so claiming, deciding and consuming it are
// scripts on the record's key alone. Finding it by id needs an index, a
// key per approval id naming the record's key. On Redis Cluster that key
// is in another slot than the record, so no script touches both: the
// index is only a pointer, written after the claim script created the
// pending record (and again on every answer that the call still waits,
// so an index write that failed heals on the next retry), and every use
// checks the record itself carries the approval id. A stale pointer (the
// approval consumed, the record deleted) leads to ErrNotFound and expires
// with its TTL.

// approvalClaimArgs are claim.lua's decision ARGV (claimArgs embeds them).
type approvalClaimArgs struct {
	Approval  string `lua:"approval"`   // packed approval id; "" when the rules allow the call
	Rule      int64  `lua:"rule"`       // the deciding rule's index
	Reason    string `lua:"reason"`     // its reason
	Approver  string `lua:"approver"`   // "operator" or "caller"
	TimeoutMS int64  `lua:"timeout_ms"` // how long it may stay pending
	UseMS     int64  `lua:"use_ms"`     // how long an approved call may wait
	Requester string `lua:"requester"`  // the call's principal id, kept by a new record
	Quorum    int64  `lua:"quorum"`     // distinct approvers needed (0 and 1: one)
	Binding   string `lua:"binding"`    // the decide config's and definition's hash
}

// approvalClaimArgsOf are req's decision arguments and its requester
// (the approval's when the request names none), which a new record keeps.
func approvalClaimArgsOf(req idempotency.ClaimRequest) approvalClaimArgs {
	a := req.Approval
	if a == nil {
		return approvalClaimArgs{Requester: req.Requester}
	}
	requester := req.Requester
	if requester == "" {
		requester = a.Requester
	}
	return approvalClaimArgs{
		Approval: packID(a.ID), Rule: int64(a.Rule), Reason: a.Reason, Approver: string(a.Approver.OrDefault()),
		TimeoutMS: millis(a.Timeout), UseMS: millis(a.UseWithin),
		Requester: requester, Quorum: int64(a.Quorum), Binding: a.Binding,
	}
}

// approveArgs are approve.lua's ARGV.
type approveArgs struct {
	ID        string `lua:"id"`         // packed approval id
	Approve   string `lua:"approve"`    // "1" approve, "0" deny
	By        string `lua:"by"`         // the decider's principal id
	ClaimedBy string `lua:"claimed_by"` // the name typed with the admin token
	Note      string `lua:"note"`
	stepArgs
}

func (a approveArgs) Argv() []any {
	return []any{a.ID, a.Approve, a.By, a.ClaimedBy, a.Note, a.StepHead, a.Tenant}
}

// history is the key beside the record named recordKey that keeps the
// approval a claim consumed (claim.lua), in the record's slot.
func (k keyLayout) history(recordKey string) string {
	return k.prefix + "H" + strings.TrimPrefix(recordKey, k.prefix+"R")
}

// applyHistory puts the approval kept in the history value raw on rec, a
// record that carries none of its own, when raw belongs to this record
// (the same creation time): the approval a claim consumed for it.
func applyHistory(rec *idempotency.Record, raw string) {
	if rec.Approval != nil || rec.State.IsApproval() {
		return
	}
	r := &reader{b: []byte(raw)}
	if created := r.u64(); r.err != nil || created != rec.CreatedAt.UnixMicro() {
		return
	}
	if a, err := decodeApprovalBlock(string(r.b)); err == nil {
		rec.Approval = a
	}
}

// approval returns the key of the approval index entry of id.
func (k keyLayout) approval(id string) string {
	return k.prefix + "A{" + tag(id) + "}" + id
}

// readApproval reads an APPROVAL block (layoutApproval); an id that does
// not unpack leaves the approval's ID empty, which recordOf refuses.
func readApproval(r *reader) *idempotency.Approval {
	a := &idempotency.Approval{}
	a.ID, _ = unpackID(r.str(r.u8()))
	a.Rule = int(r.u64())
	a.Reason = r.str(r.u16())
	a.Approver = idempotency.Approver(r.str(r.u8()))
	a.RequestedAt = time.UnixMicro(r.u64())
	a.ExpiresAt = time.UnixMicro(r.u64())
	a.UseWithin = time.Duration(r.u64()) * time.Millisecond
	r.u64() // replay ms
	a.DecidedBy = r.str(r.u16())
	if decided := r.u64(); decided != 0 {
		a.DecidedAt = time.UnixMicro(decided)
	}
	a.Note = r.str(r.u16())
	a.Requester = r.str(r.u16())
	a.Quorum = r.u8()
	a.Binding = r.str(r.u16())
	list := &reader{b: r.take(int(r.u32()))}
	for len(list.b) > 0 && list.err == nil {
		a.ApprovedBy = append(a.ApprovedBy, list.str(list.u16()))
	}
	if list.err != nil && r.err == nil {
		r.err = list.err
	}
	a.ClaimedBy = r.str(r.u16())
	return a
}

// decodeApprovalBlock decodes the APPROVAL block a claim reply carries.
func decodeApprovalBlock(block string) (*idempotency.Approval, error) {
	r := &reader{b: []byte(block)}
	a := readApproval(r)
	if r.err != nil || a.ID == "" || len(r.b) != 0 {
		return nil, fmt.Errorf("%w: approval", errBadReply)
	}
	return a, nil
}

// approvalReplies are the number of fields of claim.lua's approval replies.
var approvalReplies = map[string]int{"awaiting_approval": 3, "approval_denied": 2, "approval_expired": 2, "consumed": 3}

// decodeApprovalReply turns claim.lua's approval replies into a
// Decision; ok is false for a reply of another kind.
func decodeApprovalReply(req idempotency.ClaimRequest, reply []string) (d idempotency.Decision, ok bool, err error) {
	n, ok := approvalReplies[reply[0]]
	if !ok {
		return idempotency.Decision{}, false, nil
	}
	if len(reply) != n {
		return idempotency.Decision{}, true, fmt.Errorf("%w: %d fields", errBadReply, len(reply))
	}
	a, err := decodeApprovalBlock(reply[n-1])
	if err != nil {
		return idempotency.Decision{}, true, err
	}
	switch reply[0] {
	case "awaiting_approval":
		exec, ok := unpackID(reply[1])
		if !ok {
			return idempotency.Decision{}, true, fmt.Errorf("%w: execution id", errBadReply)
		}
		return idempotency.Decision{Outcome: idempotency.OutcomeAwaitingApproval, ExecutionID: exec, Approval: a}, true, nil
	case "approval_denied":
		return idempotency.Decision{Outcome: idempotency.OutcomeApprovalDenied, Approval: a}, true, nil
	case "approval_expired":
		return idempotency.Decision{Outcome: idempotency.OutcomeApprovalExpired, Approval: a}, true, nil
	}
	fence, err := strconv.ParseInt(reply[1], 10, 64)
	if err != nil {
		return idempotency.Decision{}, true, fmt.Errorf("%w: fencing token %q", errBadReply, reply[1])
	}
	d = claimed(req, req.ExecutionID, fence, false)
	d.Approval = a
	return d, true, nil
}

// indexApproval points the approval index at record after a claim that
// answered the call waits, and enters the approval in the listing sets
// (approvalindex.go): one pipeline, one round trip, only for calls that
// wait. It runs after the claim script, not inside it (the keys live in
// other Cluster slots than the record): for that moment the approval
// cannot be found by id nor listed, and a failed write heals on the
// call's next retry. Its TTL outlasts any life the record can have
// (pending, then approved and unused, then its replay TTL).
func (s *Store) indexApproval(ctx context.Context, req idempotency.ClaimRequest, record string, d idempotency.Decision) error {
	if d.Outcome != idempotency.OutcomeAwaitingApproval || req.Approval == nil {
		return nil
	}
	life := req.Approval.Timeout + req.Approval.UseWithin + req.ReplayTTL
	if _, err := s.client.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		s.writeApprovalIndex(ctx, pipe, d.Approval, record, life)
		return nil
	}); err != nil {
		return fmt.Errorf("index approval: %w", err)
	}
	return nil
}

// approvalRecord follows the index entry of id to the record carrying it;
// ErrNotFound when there is none.
func (s *Store) approvalRecord(ctx context.Context, id string) (foundRecord, error) {
	name, err := s.client.Get(ctx, s.keys.approval(id)).Result()
	if errors.Is(err, redis.Nil) {
		return foundRecord{}, idempotency.ErrNotFound
	}
	if err != nil {
		return foundRecord{}, err
	}
	loaded, err := s.load(ctx, s.client, []string{name}, true)
	if err != nil {
		return foundRecord{}, err
	}
	if len(loaded) != 1 || loaded[0].record.Approval == nil || loaded[0].record.Approval.ID != id {
		return foundRecord{}, idempotency.ErrNotFound // a stale pointer
	}
	return loaded[0], nil
}

// GetApproval returns the record carrying approval id: two reads (the
// index, then the record).
func (s *Store) GetApproval(ctx context.Context, id string) (idempotency.Record, error) {
	if err := s.ready(ctx); err != nil {
		return idempotency.Record{}, fmt.Errorf("redisstore: get approval: %w", err)
	}
	f, err := s.approvalRecord(ctx, id)
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("redisstore: get approval: %w", err)
	}
	return idempotency.ApprovalView(f.record), nil
}

// ListApprovals walks the approval index sets (approvalindex.go), not
// the keyspace: pending approvals (State AWAITING_APPROVAL) oldest first,
// any other filter newest first by request time. Work per page is
// bounded: at most approvalRounds batches of Limit entries.
func (s *Store) ListApprovals(ctx context.Context, filter idempotency.ApprovalFilter) (idempotency.Page, error) {
	if err := filter.Validate(); err != nil {
		return idempotency.Page{}, fmt.Errorf("redisstore: list approvals: %w", err)
	}
	return s.listApprovalIndex(ctx, filter)
}

// DecideApproval finds the record through the index and decides with
// approve.lua on the record alone, which checks the record still carries
// the approval and is pending (Redis clock) and counts a quorum; an
// approval decided for good then leaves the pending set (one more
// command, off the call path).
func (s *Store) DecideApproval(ctx context.Context, id string, decision idempotency.ApprovalDecision) (idempotency.Record, error) {
	if err := decision.Validate(); err != nil {
		return idempotency.Record{}, fmt.Errorf("redisstore: decide approval: %w", err)
	}
	if err := s.ready(ctx); err != nil {
		return idempotency.Record{}, fmt.Errorf("redisstore: decide approval: %w", err)
	}
	f, err := s.approvalRecord(ctx, id)
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("redisstore: decide approval: %w", err)
	}
	if consumed := idempotency.ApprovalView(f.record); consumed.State == idempotency.StateConsumed {
		return idempotency.Record{}, idempotency.NotPending(consumed.State, consumed.Approval)
	}
	cmds, err := s.eval(ctx, call(approveScript, []string{f.key},
		approveArgs{ID: packID(id), Approve: flag(decision.Approve), By: decision.By, ClaimedBy: decision.ClaimedBy, Note: decision.Note,
			stepArgs: s.keys.stepArgs(f.record.Scope.Tenant)}))
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("redisstore: decide approval: %w", err)
	}
	reply, err := cmds[0].StringSlice()
	if err != nil || len(reply) == 0 {
		return idempotency.Record{}, fmt.Errorf("redisstore: decide approval: %w", errors.Join(errBadReply, err))
	}
	switch {
	case reply[0] == "ok" && len(reply) == 3:
		expiry, err := strconv.ParseInt(reply[2], 10, 64)
		if err != nil {
			return idempotency.Record{}, fmt.Errorf("redisstore: decide approval: %w: expiry", errBadReply)
		}
		rec, err := recordOf(f.record.Scope, reply[1], expiresAt(time.Duration(expiry)*time.Millisecond))
		if err != nil {
			return idempotency.Record{}, fmt.Errorf("redisstore: decide approval: %w", err)
		}
		if rec.State != idempotency.StateAwaitingApproval { // not waiting for more approvers
			s.unindexPending(ctx, f.record.Approval)
		}
		return rec, nil
	case reply[0] == "not_pending" && len(reply) == 2:
		rec, err := recordOf(f.record.Scope, reply[1], time.Time{})
		if err != nil {
			return idempotency.Record{}, fmt.Errorf("redisstore: decide approval: %w", err)
		}
		if rec.State == idempotency.StateAwaitingApproval {
			rec.State = idempotency.StateExpired // pending, yet refused: expired on the Redis clock
		}
		return idempotency.Record{}, idempotency.NotPending(rec.State, rec.Approval)
	case reply[0] == "not_found":
		// Consumed since it was read: say so, as a read would now.
		if current, err := s.approvalRecord(ctx, id); err == nil && idempotency.ApprovalView(current.record).State == idempotency.StateConsumed {
			return idempotency.Record{}, idempotency.NotPending(idempotency.StateConsumed, current.record.Approval)
		}
		return idempotency.Record{}, idempotency.ErrNotFound
	}
	return idempotency.Record{}, fmt.Errorf("redisstore: decide approval: %w", errBadReply)
}
