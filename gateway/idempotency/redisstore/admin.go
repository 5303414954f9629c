package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// Get returns the record under scope: the direct (step-less) record key, or
// one the scope's pointer set names. Reads only; two round trips at most.
func (s *Store) Get(ctx context.Context, scope idempotency.Scope) (idempotency.Record, error) {
	found, err := s.find(ctx, scope)
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("redisstore: get %v: %w", scope, err)
	}
	if len(found) == 0 {
		return idempotency.Record{}, idempotency.ErrNotFound
	}
	newest := found[0].record
	for _, f := range found[1:] {
		if f.record.CreatedAt.After(newest.CreatedAt) {
			newest = f.record
		}
	}
	return newest, nil
}

// Delete removes every record holding scope (normally one) and frees their
// steps, each with an atomic scope-checked script.
func (s *Store) Delete(ctx context.Context, scope idempotency.Scope) error {
	found, err := s.find(ctx, scope)
	if err != nil {
		return fmt.Errorf("redisstore: delete %v: %w", scope, err)
	}
	deleted := 0
	for _, f := range found {
		ok, err := s.evalInt(ctx, scriptCall{deleteScript, []string{f.key}, []any{scope.Tenant, scope.Tool, scope.Key}})
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
// client reused a key under another session.
func (s *Store) find(ctx context.Context, scope idempotency.Scope) ([]foundRecord, error) {
	direct := s.keys.record(scope, nil)
	var members *redis.StringSliceCmd
	var directFields *redis.MapStringStringCmd
	if _, err := s.client.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		members = pipe.SMembers(ctx, s.keys.pointer(scope))
		directFields = pipe.HGetAll(ctx, direct)
		return nil
	}); err != nil {
		return nil, err
	}
	keys := []string{direct}
	fields := []*redis.MapStringStringCmd{directFields}
	var pointed []string
	for _, key := range members.Val() {
		if key != direct {
			pointed = append(pointed, key)
		}
	}
	if len(pointed) > 0 {
		if _, err := s.client.Pipelined(ctx, func(pipe redis.Pipeliner) error {
			for _, key := range pointed {
				keys = append(keys, key)
				fields = append(fields, pipe.HGetAll(ctx, key))
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}
	var found []foundRecord
	for i, cmd := range fields {
		f := cmd.Val()
		if f["state"] == "" || f["tenant"] != scope.Tenant || f["tool"] != scope.Tool || f["key"] != scope.Key {
			continue // gone, or not this scope
		}
		rec, err := decodeRecord(scope, f)
		if err != nil {
			return nil, fmt.Errorf("record of %v: %w", scope, err) // the Redis key name holds the full key
		}
		found = append(found, foundRecord{key: keys[i], record: rec})
	}
	return found, nil
}

// decodeRecord turns a record hash into a Record.
func decodeRecord(scope idempotency.Scope, f map[string]string) (idempotency.Record, error) {
	micros := func(field string) (time.Time, error) {
		if f[field] == "" {
			return time.Time{}, nil
		}
		us, err := strconv.ParseInt(f[field], 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("%w: %s %q", errBadReply, field, f[field])
		}
		return time.UnixMicro(us), nil
	}
	rec := idempotency.Record{
		Scope:       scope,
		State:       idempotency.State(f["state"]),
		Fingerprint: f["fp"],
		ExecutionID: f["exec"],
	}
	var err error
	if rec.FencingToken, err = strconv.ParseInt(f["fence"], 10, 64); err != nil {
		return idempotency.Record{}, fmt.Errorf("%w: fence %q", errBadReply, f["fence"])
	}
	if rec.CreatedAt, err = micros("created"); err != nil {
		return idempotency.Record{}, err
	}
	if rec.ExpiresAt, err = micros("expires"); err != nil {
		return idempotency.Record{}, err
	}
	if rec.State == idempotency.StateInProgress {
		if rec.LeaseExpiresAt, err = micros("lease"); err != nil {
			return idempotency.Record{}, err
		}
	}
	if rec.State == idempotency.StateCompleted {
		status, err := strconv.Atoi(f["status"])
		if err != nil {
			return idempotency.Record{}, fmt.Errorf("%w: status %q", errBadReply, f["status"])
		}
		rec.Response = &idempotency.StoredResponse{Status: status, ContentType: f["ctype"], Body: []byte(f["body"])}
	}
	return rec, nil
}
