package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/redisscript"
)

// Renew extends the lease to ttl from now (Redis time) if the caller still
// owns the record: one owner-checked script (and on a Cluster, for a
// record under its session's tag, its scope's pointer after it).
func (s *Store) Renew(ctx context.Context, lease idempotency.Lease, ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("redisstore: renew: ttl %v must be positive", ttl)
	}
	if err := s.ready(ctx); err != nil {
		return ownedResult("renew", lease, 0, err)
	}
	record := s.keys.record(lease.Scope, lease.Step)
	lives, err := s.evalInt(ctx, call(renewScript, []string{record}, renewArgs{ownerOf(lease), millis(ttl), s.keys.stepArgs(lease.Scope.Tenant)}))
	if err != nil || lives <= 0 {
		return ownedResult("renew", lease, 0, err)
	}
	// A record under its session's tag (Cluster) stays findable by its
	// scope (Get, Delete, a reconciler) however long its tool runs: the
	// claim sized the pointer for one lease. Best effort: the lease is
	// renewed, and the completion writes the pointer again.
	if s.keys.usesPointer(lease.Step) {
		_, _ = s.eval(ctx, call(pointScript, []string{s.keys.pointer(lease.Scope)}, pointArgs{Record: record, TTLMS: int64(lives)}))
	}
	return nil
}

// Complete stores resp as COMPLETED for ttl if the caller still owns the
// record. For a record under a session tag the same pipeline keeps the
// scope's pointer alive as long as the record.
func (s *Store) Complete(ctx context.Context, lease idempotency.Lease, resp idempotency.StoredResponse, ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("redisstore: complete: ttl %v must be positive", ttl)
	}
	if err := s.ready(ctx); err != nil {
		return ownedResult("complete", lease, 0, err)
	}
	if err := checkResponse(resp); err != nil {
		return fmt.Errorf("redisstore: complete %v: %w", lease.Scope, err)
	}
	ttlMS := millis(ttl)
	args := &completeArgs{ownerCheck: ownerOf(lease), ReplayMS: ttlMS, Status: resp.Status, Ctype: packCtype(resp.ContentType), Body: resp.Body,
		stepArgs: s.keys.stepArgs(lease.Scope.Tenant), KeepArgs: flag(lease.KeepArguments)}
	if s.receiptOutbox {
		args.OutboxExec, args.OutboxEntry = lease.ExecutionID, idempotency.EncodeOutboxEntry(lease, resp.Status, time.Now())
	}
	return s.finish(ctx, "complete", lease, ttlMS, completeScript, args)
}

// MarkUnknown turns the caller's IN_PROGRESS record UNKNOWN for ttl if the
// caller still owns it (an expired lease nobody took over included). For a
// record under a session tag the same pipeline keeps the scope's pointer
// alive as long as the record, as Complete does.
func (s *Store) MarkUnknown(ctx context.Context, lease idempotency.Lease, ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("redisstore: mark unknown: ttl %v must be positive", ttl)
	}
	if err := s.ready(ctx); err != nil {
		return ownedResult("mark unknown", lease, 0, err)
	}
	ttlMS := millis(ttl)
	return s.finish(ctx, "mark unknown", lease, ttlMS, markUnknownScript, markUnknownArgs{ownerOf(lease), ttlMS, s.keys.stepArgs(lease.Scope.Tenant)})
}

// finish runs a script that ends lease's record (complete.lua,
// mark_unknown.lua: it now lives ttlMS) if the caller still owns it, and
// for a record under a session tag, in the same pipeline, keeps the
// scope's pointer alive as long. A record that too few replicas
// acknowledged (WaitReplicas) is reported as an error.
func (s *Store) finish(ctx context.Context, op string, lease idempotency.Lease, ttlMS int64, script *redis.Script, args redisscript.Args) error {
	record := s.keys.record(lease.Scope, lease.Step)
	keys := []string{record}
	if (s.receiptOutbox || lease.KeepArguments) && script == completeScript {
		// complete.lua's KEYS[2] names the outbox even when receipts are
		// off and only KEYS[3] (the kept arguments) is used.
		keys = append(keys, s.keys.outbox(lease.Scope, lease.Step))
		if lease.KeepArguments {
			keys = append(keys, s.keys.keptArguments(record))
		}
	}
	calls := []redisscript.Call{call(script, keys, args)}
	if s.keys.usesPointer(lease.Step) {
		calls = append(calls, call(pointScript, []string{s.keys.pointer(lease.Scope)}, pointArgs{Record: record, TTLMS: ttlMS}))
	}
	if lease.Effect != nil { // an earlier build's reservation carried a TTL: no more
		calls = append(calls, call(effectKeepScript, []string{s.keys.effect(lease.Scope, lease.Effect.Value)}, effectKeepArgs{}))
	}
	cmds, acked, err := s.evalReplicated(ctx, calls...)
	if err != nil {
		return ownedResult(op, lease, 0, err)
	}
	ok, err := cmds[0].Int()
	if err == nil && ok == 1 {
		err = s.wait.check(acked)
	}
	return ownedResult(op, lease, ok, err)
}

// Release deletes the record and frees its step if the caller still owns
// it; then, for a record that held an effect, removes the reservation if it
// still names the record. The reservation goes second, and only after a
// release that happened, so it never disappears before its holder (a
// gateway that dies between the two leaves a stale reservation, which the
// next claim of the value or the sweep removes).
func (s *Store) Release(ctx context.Context, lease idempotency.Lease) error {
	if err := s.ready(ctx); err != nil {
		return ownedResult("release", lease, 0, err)
	}
	rec := s.keys.record(lease.Scope, lease.Step)
	ok, err := s.evalRelease(ctx, call(releaseScript, []string{rec, s.keys.charged(rec)}, releaseArgs{ownerOf(lease), s.keys.stepArgs(lease.Scope.Tenant), flag(s.keys.sessionSlots)}))
	if err == nil && ok == 1 && lease.Effect != nil {
		// The record is released either way: a reservation left behind
		// names a record that is gone, counts for nothing, and the next
		// claim of the value or the sweep removes it. So its failure is
		// not the release's.
		_ = s.dropEffect(ctx, lease)
	}
	return ownedResult("release", lease, ok, err)
}

// checkResponse refuses what the packed record cannot hold: a status
// outside 0…65535 or a content type above 65535 bytes.
func checkResponse(resp idempotency.StoredResponse) error {
	if resp.Status < 0 || resp.Status > 65535 || len(resp.ContentType) > 65534 {
		return fmt.Errorf("status %d or a %d-byte content type out of range", resp.Status, len(resp.ContentType))
	}
	return nil
}

// ownedResult maps an owner-checked script's answer to the Store's errors.
func ownedResult(op string, lease idempotency.Lease, ok int, err error) error {
	switch {
	case err != nil:
		return fmt.Errorf("redisstore: %s %v: %w", op, lease.Scope, err)
	case ok != 1:
		return idempotency.ErrLeaseLost
	}
	return nil
}
