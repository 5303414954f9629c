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

// Get returns the record under scope: the direct (step-less) record key, or
// one the scope's pointer set names (Cluster), in either layout. Reads
// only; two round trips at most.
func (s *Store) Get(ctx context.Context, scope idempotency.Scope) (idempotency.Record, error) {
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
	found, err := s.find(ctx, scope)
	if err != nil {
		return fmt.Errorf("redisstore: delete %v: %w", scope, err)
	}
	deleted := 0
	for _, f := range found {
		call := scriptCall{deleteScript, []string{f.key}, nil}
		if f.legacy {
			call = scriptCall{legacyDeleteScript, []string{f.key}, []any{scope.Tenant, scope.Tool, scope.Key}}
		}
		ok, err := s.evalInt(ctx, call)
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
	legacy bool // a hash of the previous layout
	record idempotency.Record
}

// find loads the records that hold scope. More than one exists only if a
// client reused a key under another session (Cluster), or during the
// upgrade window.
func (s *Store) find(ctx context.Context, scope idempotency.Scope) ([]foundRecord, error) {
	names := []string{s.keys.record(scope, nil)}
	if s.legacy {
		names = append(names, s.keys.legacyRecord(scope, nil))
	}
	if s.keys.sessionSlots {
		sets := []string{s.keys.pointer(scope)}
		if s.legacy {
			sets = append(sets, s.keys.legacyPointer(scope))
		}
		cmds := make([]*redis.StringSliceCmd, len(sets))
		if _, err := s.client.Pipelined(ctx, func(pipe redis.Pipeliner) error {
			for i, set := range sets {
				cmds[i] = pipe.SMembers(ctx, set)
			}
			return nil
		}); err != nil {
			return nil, err
		}
		seen := map[string]bool{names[0]: true}
		if s.legacy {
			seen[names[1]] = true
		}
		for _, cmd := range cmds {
			for _, name := range cmd.Val() {
				if !seen[name] {
					seen[name] = true
					names = append(names, name)
				}
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

// load reads the records named (either layout) through c in one pipeline,
// skipping names that are gone or are not records. withResponse false
// leaves Response out (List).
func (s *Store) load(ctx context.Context, c redis.Cmdable, names []string, withResponse bool) ([]foundRecord, error) {
	type cmds struct {
		value  *redis.StringCmd
		fields *redis.MapStringStringCmd
		expiry *redis.DurationCmd
	}
	out := make([]cmds, len(names))
	if _, err := c.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for i, name := range names {
			if s.isLegacyName(name) {
				out[i].fields = pipe.HGetAll(ctx, name)
			} else {
				out[i].value = pipe.Get(ctx, name)
				out[i].expiry = pipe.PExpireTime(ctx, name)
			}
		}
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	var found []foundRecord
	for i, name := range names {
		var rec idempotency.Record
		if out[i].fields != nil {
			f, err := out[i].fields.Result()
			if err != nil {
				return nil, err
			}
			if f["state"] == "" {
				continue // gone
			}
			scope := idempotency.Scope{Tenant: f["tenant"], Tool: f["tool"], Key: f["key"]}
			r, err := legacyRecordOf(scope, f)
			if err != nil {
				return nil, fmt.Errorf("record of %v: %w", scope, err) // the key name holds the full key
			}
			rec = r
		} else {
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
			r, err := recordOf(scope, v, expiresAt(out[i].expiry.Val()))
			if err != nil {
				return nil, fmt.Errorf("record of %v: %w", scope, err)
			}
			rec = r
		}
		if !withResponse {
			rec.Response = nil
		}
		found = append(found, foundRecord{key: name, legacy: out[i].fields != nil, record: rec})
	}
	return found, nil
}

// isLegacyName reports whether name is a record of the previous layout.
func (s *Store) isLegacyName(name string) bool {
	return len(name) > len(s.keys.prefix)+1 && name[len(s.keys.prefix)] == 'r' && name[len(s.keys.prefix)+1] == ':'
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
	found, err := s.find(ctx, scope)
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("redisstore: resolve %v: %w", scope, err)
	}
	if len(found) == 0 {
		return idempotency.Record{}, idempotency.ErrNotFound
	}
	target := newest(found)
	layout, ctype := "new", packCtype(resp.ContentType)
	if target.legacy {
		layout, ctype = "old", resp.ContentType
	}
	cmds, err := s.eval(ctx, scriptCall{resolveScript, []string{target.key},
		[]any{millis(ttl), strconv.Itoa(resp.Status), ctype, resp.Body, layout}})
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
	case "ok_legacy":
		loaded, err := s.load(ctx, s.client, []string{target.key}, true)
		if err != nil || len(loaded) == 0 {
			return idempotency.Record{}, fmt.Errorf("redisstore: resolve %v: reading it back: %w", scope, errors.Join(idempotency.ErrNotFound, err))
		}
		return loaded[0].record, nil
	case "not_resolvable":
		return idempotency.Record{}, idempotency.ErrNotResolvable
	case "not_found":
		return idempotency.Record{}, idempotency.ErrNotFound
	}
	return idempotency.Record{}, fmt.Errorf("redisstore: resolve %v: %w", scope, errBadReply)
}
