package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// Listing approvals walks two sorted sets instead of the keyspace, so a
// page costs the same with a thousand records or ten million:
//
//   - <prefix>AP, the pending approvals, walked oldest first (what an
//     approver answers first);
//   - <prefix>AA, every approval, walked newest first (as pgstore lists,
//     and as the console's "recently decided" wants).
//
// A member is indexMember: the approval's request time (Unix ms, 16 hex
// digits) then its id, every score 0, so the set's lexical order is the
// time order and a cursor (the last member returned) continues exactly
// with ZRANGE BYLEX, however many approvals share a millisecond.
//
// The sets are plain keys (each in its own Cluster slot), written in the
// pipeline that writes the approval's pointer key (indexApproval), so
// they cost no round trip of their own. Like the pointer they are written
// after the claim script: a listing may miss an approval for the moment
// between the two, and a write that failed heals on the call's next retry
// (every answer that the call still waits writes them again, with the
// same member). They only point: every listing loads the record through
// the pointer and keeps it only if it still carries the approval, in the
// state asked for.
//
// Entries leave AP when DecideApproval decided them, and when a listing
// finds their approval no longer pending (consumed, expired, deleted).
// Entries leave AA when a listing finds no record carrying their
// approval. Both are trimmed at every indexApproval of anything requested
// longer ago than that call's approval life (timeout + use-within +
// replay TTL), after which no record of the same settings can carry it.
const (
	pendingIndexName = "AP"
	allIndexName     = "AA"
	// approvalRounds bounds one ListApprovals: at most approvalRounds
	// batches of Limit index entries, each followed by one pipelined read
	// of their pointers and one of their records.
	approvalRounds = 4
	// pointerGrace is how long an index entry may lack its pointer before
	// a listing drops it: on a cluster the pointer and the sets live on
	// different nodes, and the pipeline that writes them may land the set
	// first.
	pointerGrace = time.Minute
	// stampDigits is the width of an indexMember's time stamp.
	stampDigits = 16
)

func (k keyLayout) pendingIndex() string { return k.prefix + pendingIndexName }
func (k keyLayout) allIndex() string     { return k.prefix + allIndexName }

// indexMember is the member of approval a in both index sets.
func indexMember(a *idempotency.Approval) string {
	return stampOf(a.RequestedAt) + a.ID
}

func stampOf(t time.Time) string {
	return fmt.Sprintf("%0*x", stampDigits, max(t.UnixMilli(), 0))
}

// parseMember splits a member (or a cursor, which is one) into request
// time and approval id; ok is false for anything indexMember does not
// make.
func parseMember(m string) (requested time.Time, id string, ok bool) {
	if len(m) <= stampDigits {
		return time.Time{}, "", false
	}
	ms, err := strconv.ParseUint(m[:stampDigits], 16, 63)
	if err != nil {
		return time.Time{}, "", false
	}
	return time.UnixMilli(int64(ms)), m[stampDigits:], true
}

// writeApprovalIndex queues, in pipe, the approval's pointer to record
// and its entries in both index sets, and trims both of what is older
// than life.
func (s *Store) writeApprovalIndex(ctx context.Context, pipe redis.Pipeliner, a *idempotency.Approval, record string, life time.Duration) {
	pipe.Set(ctx, s.keys.approval(a.ID), record, life)
	member := indexMember(a)
	oldest := "(" + stampOf(time.Now().Add(-life))
	for _, set := range []string{s.keys.pendingIndex(), s.keys.allIndex()} {
		pipe.ZAdd(ctx, set, redis.Z{Member: member})
		pipe.ZRemRangeByLex(ctx, set, "-", oldest)
	}
}

// unindexPending drops a decided approval from the pending set. Best
// effort: a listing drops an entry whose approval is no longer pending.
func (s *Store) unindexPending(ctx context.Context, a *idempotency.Approval) {
	_ = s.client.ZRem(ctx, s.keys.pendingIndex(), indexMember(a)).Err()
}

// listApprovalIndex is ListApprovals: filter is valid.
func (s *Store) listApprovalIndex(ctx context.Context, filter idempotency.ApprovalFilter) (idempotency.Page, error) {
	after := filter.Cursor
	if _, _, ok := parseMember(after); after != "" && !ok {
		return idempotency.Page{}, fmt.Errorf("redisstore: list approvals: cursor is not one this store returned: %w", idempotency.ErrInvalidCursor)
	}
	if err := s.ready(ctx); err != nil {
		return idempotency.Page{}, fmt.Errorf("redisstore: list approvals: %w", err)
	}
	pending := filter.State == idempotency.StateAwaitingApproval
	set := s.keys.allIndex()
	if pending {
		set = s.keys.pendingIndex()
	}
	var page []idempotency.Record
	var stale []any
	defer func() { // best effort: the next listing drops them otherwise
		if len(stale) > 0 {
			_ = s.client.ZRem(context.WithoutCancel(ctx), set, stale...).Err()
		}
	}()
	for range approvalRounds {
		members, err := s.client.ZRangeArgs(ctx, indexRange(set, after, !pending, filter.Limit)).Result()
		if err != nil {
			return idempotency.Page{}, fmt.Errorf("redisstore: list approvals: index: %w", err)
		}
		found, err := s.indexedRecords(ctx, members)
		if err != nil {
			return idempotency.Page{}, fmt.Errorf("redisstore: list approvals: %w", err)
		}
		for i, m := range members {
			e := found[i]
			e.record = idempotency.ApprovalView(e.record)
			switch {
			case !e.pointed && !missingLongEnough(m): // its pointer may be on its way
				continue
			case !e.live, pending && e.record.State != idempotency.StateAwaitingApproval:
				stale = append(stale, m)
				continue
			}
			if approvalMatches(e.record, filter) {
				page = append(page, e.record)
			}
			if len(page) == filter.Limit {
				if i == len(members)-1 && len(members) < filter.Limit {
					return idempotency.Page{Records: page}, nil
				}
				return idempotency.Page{Records: page, Cursor: m}, nil
			}
		}
		if len(members) < filter.Limit {
			return idempotency.Page{Records: page}, nil
		}
		after = members[len(members)-1]
	}
	return idempotency.Page{Records: page, Cursor: after}, nil
}

// indexRange is the next batch of up to limit members after the cursor
// after ("" = from the start), oldest first or, when newestFirst, newest
// first.
func indexRange(set, after string, newestFirst bool, limit int) redis.ZRangeArgs {
	r := redis.ZRangeArgs{Key: set, ByLex: true, Start: "-", Stop: "+", Count: int64(limit)}
	if after != "" {
		r.Start = "(" + after
	}
	if newestFirst {
		r.Rev, r.Start, r.Stop = true, "+", "-"
		if after != "" {
			r.Start = "(" + after
		}
	}
	return r
}

// missingLongEnough reports whether an entry whose pointer is missing is
// old enough to be dropped (pointerGrace).
func missingLongEnough(member string) bool {
	requested, _, ok := parseMember(member)
	return !ok || time.Since(requested) > pointerGrace
}

// approvalMatches applies an approval filter to a loaded record.
func approvalMatches(rec idempotency.Record, f idempotency.ApprovalFilter) bool {
	return (f.State == "" || rec.State == f.State) &&
		(f.Tenant == "" || rec.Scope.Tenant == f.Tenant) &&
		(f.Tool == "" || rec.Scope.Tool == f.Tool)
}

// indexEntry is what an index member leads to.
type indexEntry struct {
	// pointed: the approval's pointer key exists; live: it names a record
	// that still carries the approval, record.
	pointed, live bool
	record        idempotency.Record
}

// indexedRecords loads the records the index members point at, in the
// members' order: one pipelined read of the pointers, one of the records
// (without response or arguments).
func (s *Store) indexedRecords(ctx context.Context, members []string) ([]indexEntry, error) {
	found := make([]indexEntry, len(members))
	if len(members) == 0 {
		return found, nil
	}
	ids := make([]string, len(members))
	pointers := make([]*redis.StringCmd, len(members))
	if _, err := s.client.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for i, m := range members {
			_, ids[i], _ = parseMember(m)
			pointers[i] = pipe.Get(ctx, s.keys.approval(ids[i]))
		}
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("approval pointers: %w", err)
	}
	var names []string
	for _, p := range pointers {
		if name, err := p.Result(); err == nil {
			names = append(names, name)
		}
	}
	loaded, err := s.load(ctx, s.client, names, false)
	if err != nil {
		return nil, err
	}
	byKey := make(map[string]idempotency.Record, len(loaded))
	for _, f := range loaded {
		byKey[f.key] = f.record
	}
	for i, p := range pointers {
		rec, ok := byKey[p.Val()]
		found[i] = indexEntry{pointed: p.Err() == nil, live: ok && rec.Approval != nil && rec.Approval.ID == ids[i], record: rec}
	}
	return found, nil
}
