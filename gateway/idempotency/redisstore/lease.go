package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/redisscript"
)

// Renew extends the lease to ttl from now (Redis time) if the caller still
// owns the record: one owner-checked script.
func (s *Store) Renew(ctx context.Context, lease idempotency.Lease, ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("redisstore: renew: ttl %v must be positive", ttl)
	}
	if err := s.ready(ctx); err != nil {
		return ownedResult("renew", lease, 0, err)
	}
	ok, err := s.evalInt(ctx, call(renewScript, []string{s.keys.record(lease.Scope, lease.Step)}, renewArgs{ownerOf(lease), millis(ttl)}))
	return ownedResult("renew", lease, ok, err)
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
	record := s.keys.record(lease.Scope, lease.Step)
	ttlMS := millis(ttl)
	calls := []redisscript.Call{call(completeScript, []string{record},
		completeArgs{ownerOf(lease), ttlMS, resp.Status, packCtype(resp.ContentType), resp.Body})}
	if err := checkResponse(resp); err != nil {
		return fmt.Errorf("redisstore: complete %v: %w", lease.Scope, err)
	}
	if s.keys.usesPointer(lease.Step) {
		calls = append(calls, call(pointScript, []string{s.keys.pointer(lease.Scope)}, pointArgs{Record: record, TTLMS: ttlMS}))
	}
	cmds, acked, err := s.evalReplicated(ctx, calls...)
	if err != nil {
		return ownedResult("complete", lease, 0, err)
	}
	ok, err := cmds[0].Int()
	if err == nil && ok == 1 {
		err = s.wait.check(acked)
	}
	return ownedResult("complete", lease, ok, err)
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
	record := s.keys.record(lease.Scope, lease.Step)
	ttlMS := millis(ttl)
	calls := []redisscript.Call{call(markUnknownScript, []string{record}, markUnknownArgs{ownerOf(lease), ttlMS})}
	if s.keys.usesPointer(lease.Step) {
		calls = append(calls, call(pointScript, []string{s.keys.pointer(lease.Scope)}, pointArgs{Record: record, TTLMS: ttlMS}))
	}
	cmds, acked, err := s.evalReplicated(ctx, calls...)
	if err != nil {
		return ownedResult("mark unknown", lease, 0, err)
	}
	ok, err := cmds[0].Int()
	if err == nil && ok == 1 {
		err = s.wait.check(acked)
	}
	return ownedResult("mark unknown", lease, ok, err)
}

// Release deletes the record and frees its step if the caller still owns it.
func (s *Store) Release(ctx context.Context, lease idempotency.Lease) error {
	if err := s.ready(ctx); err != nil {
		return ownedResult("release", lease, 0, err)
	}
	ok, err := s.evalInt(ctx, call(releaseScript, []string{s.keys.record(lease.Scope, lease.Step)}, releaseArgs{ownerOf(lease)}))
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
