package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// Get returns the record under scope: the direct (step-less) record key, or
// one the scope's pointer set names (Cluster). Reads
// only; two round trips at most.
func (s *Store) Get(ctx context.Context, scope idempotency.Scope) (idempotency.Record, error) {
	if err := s.ready(ctx); err != nil {
		return idempotency.Record{}, fmt.Errorf("redisstore: get %v: %w", scope, err)
	}
	found, err := s.find(ctx, scope)
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("redisstore: get %v: %w", scope, err)
	}
	if len(found) == 0 {
		return idempotency.Record{}, idempotency.ErrNotFound
	}
	return newest(found).record, nil
}

// newest is the most recently created of found (not empty).
func newest(found []foundRecord) foundRecord {
	n := found[0]
	for _, f := range found[1:] {
		if f.record.CreatedAt.After(n.record.CreatedAt) {
			n = f
		}
	}
	return n
}

// Delete removes every record holding scope (normally one) and frees their
// steps, each with an atomic script.
func (s *Store) Delete(ctx context.Context, scope idempotency.Scope) error {
	if err := s.ready(ctx); err != nil {
		return fmt.Errorf("redisstore: delete %v: %w", scope, err)
	}
	found, err := s.find(ctx, scope)
	if err != nil {
		return fmt.Errorf("redisstore: delete %v: %w", scope, err)
	}
	deleted := 0
	for _, f := range found {
		ok, err := s.evalRelease(ctx, call(deleteScript, []string{f.key, s.keys.charged(f.key), s.keys.keptArguments(f.key)}, deleteArgs{s.keys.stepArgs(scope.Tenant), flag(s.keys.sessionSlots)}))
		if err != nil {
			return fmt.Errorf("redisstore: delete %v: %w", scope, err)
		}
		deleted += ok
	}
	if deleted == 0 {
		return idempotency.ErrNotFound
	}
	return nil
}

type foundRecord struct {
	key    string
	record idempotency.Record
}

// find loads the records that hold scope. More than one exists only if a
// client reused a key under another session (Cluster).
func (s *Store) find(ctx context.Context, scope idempotency.Scope) ([]foundRecord, error) {
	names := []string{s.keys.record(scope, nil)}
	if s.keys.sessionSlots {
		members, err := s.client.SMembers(ctx, s.keys.pointer(scope)).Result()
		if err != nil {
			return nil, err
		}
		for _, name := range members {
			if name != names[0] {
				names = append(names, name)
			}
		}
	}
	loaded, err := s.load(ctx, s.client, names, true)
	if err != nil {
		return nil, err
	}
	var found []foundRecord
	for _, f := range loaded {
		if f.record.Scope == scope {
			found = append(found, f)
		}
	}
	return found, nil
}

// load reads the records named through c in one pipeline,
// skipping names that are gone or are not records. withResponse false
// leaves Response out (List).
func (s *Store) load(ctx context.Context, c redis.Cmdable, names []string, withResponse bool) ([]foundRecord, error) {
	type cmds struct {
		value  *redis.StringCmd
		expiry *redis.DurationCmd
		// reconcile is the record's reconciliation (reconcile.go).
		reconcile *redis.StringCmd
		// history is the approval a claim consumed for it (approvals.go).
		history *redis.StringCmd
		// kept are its kept canonical arguments (keptargs.go), read
		// only withResponse.
		kept *redis.StringCmd
	}
	out := make([]cmds, len(names))
	if _, err := c.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for i, name := range names {
			out[i].value = pipe.Get(ctx, name)
			out[i].expiry = pipe.PExpireTime(ctx, name)
			out[i].reconcile = pipe.Get(ctx, s.keys.reconcileKey(name))
			out[i].history = pipe.Get(ctx, s.keys.history(name))
			if withResponse {
				out[i].kept = pipe.Get(ctx, s.keys.keptArguments(name))
			}
		}
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	var found []foundRecord
	for i, name := range names {
		v, err := out[i].value.Result()
		if errors.Is(err, redis.Nil) {
			continue // gone
		}
		if err != nil {
			return nil, err
		}
		scope, err := s.keys.parseRecord(name)
		if err != nil {
			continue // a name a pointer set held that is not a record
		}
		rec, err := recordOf(scope, v, expiresAt(out[i].expiry.Val()))
		if err != nil {
			return nil, fmt.Errorf("record of %v: %w", scope, err) // the key name holds the full key
		}
		if raw, err := out[i].reconcile.Result(); err == nil {
			if err := applyReconciliation(&rec, raw); err != nil {
				return nil, fmt.Errorf("record of %v: %w", scope, err)
			}
		}
		if raw, err := out[i].history.Result(); err == nil {
			applyHistory(&rec, raw)
		}
		if out[i].kept != nil {
			if raw, err := out[i].kept.Result(); err == nil {
				applyKeptArguments(&rec, raw)
			}
		}
		if !withResponse {
			rec.Response = nil
			rec.CanonicalArguments = nil
		}
		found = append(found, foundRecord{key: name, record: rec})
	}
	return found, nil
}

// Resolve turns an UNKNOWN record, or an IN_PROGRESS one whose lease has
// expired, into COMPLETED with resp for ttl: one script (resolve.lua) on
// the record Get would return.
func (s *Store) Resolve(ctx context.Context, scope idempotency.Scope, resp idempotency.StoredResponse, ttl time.Duration) (idempotency.Record, error) {
	if ttl <= 0 {
		return idempotency.Record{}, fmt.Errorf("redisstore: resolve: ttl %v must be positive", ttl)
	}
	if err := checkResponse(resp); err != nil {
		return idempotency.Record{}, fmt.Errorf("redisstore: resolve %v: %w", scope, err)
	}
	if err := s.ready(ctx); err != nil {
		return idempotency.Record{}, fmt.Errorf("redisstore: resolve %v: %w", scope, err)
	}
	found, err := s.find(ctx, scope)
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("redisstore: resolve %v: %w", scope, err)
	}
	if len(found) == 0 {
		return idempotency.Record{}, idempotency.ErrNotFound
	}
	target := newest(found)
	// The scope's pointer first: the resolved record must stay findable
	// (Get, Delete, the admin API) as long as it replays.
	if err := s.keepPointer(ctx, scope, target.key, millis(ttl)); err != nil {
		return idempotency.Record{}, fmt.Errorf("redisstore: resolve %v: %w", scope, err)
	}
	cmds, err := s.eval(ctx, call(resolveScript, []string{target.key},
		resolveArgs{millis(ttl), resp.Status, packCtype(resp.ContentType), resp.Body, s.keys.stepArgs(scope.Tenant)}))
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("redisstore: resolve %v: %w", scope, err)
	}
	reply, err := cmds[0].StringSlice()
	if err != nil || len(reply) == 0 {
		return idempotency.Record{}, fmt.Errorf("redisstore: resolve %v: %w", scope, errors.Join(errBadReply, err))
	}
	switch reply[0] {
	case "ok":
		if len(reply) != 2 {
			return idempotency.Record{}, fmt.Errorf("redisstore: resolve %v: %w", scope, errBadReply)
		}
		expiry, err := s.client.PExpireTime(ctx, target.key).Result()
		if err != nil {
			return idempotency.Record{}, fmt.Errorf("redisstore: resolve %v: %w", scope, err)
		}
		rec, err := recordOf(scope, reply[1], expiresAt(expiry))
		if err != nil {
			return idempotency.Record{}, fmt.Errorf("redisstore: resolve %v: %w", scope, err)
		}
		return rec, nil
	case "not_resolvable":
		return idempotency.Record{}, idempotency.ErrNotResolvable
	case "not_found":
		return idempotency.Record{}, idempotency.ErrNotFound
	}
	return idempotency.Record{}, fmt.Errorf("redisstore: resolve %v: %w", scope, errBadReply)
}

// keepPointer makes the scope's pointer set (Redis Cluster, a record under
// its session's tag) name record and live at least ttlMS, before a write
// that makes record live that long without a claim (resolve,
// reconciliation): the claim's pointer was sized for the claim's TTLs,
// and a record whose pointer is gone still replays but Get and Delete no
// longer find it. Nothing to do for a record found by its scope alone.
func (s *Store) keepPointer(ctx context.Context, scope idempotency.Scope, record string, ttlMS int64) error {
	if !s.keys.sessionSlots || record == s.keys.record(scope, nil) {
		return nil
	}
	_, err := s.eval(ctx, call(pointScript, []string{s.keys.pointer(scope)}, pointArgs{Record: record, TTLMS: ttlMS}))
	return err
}
