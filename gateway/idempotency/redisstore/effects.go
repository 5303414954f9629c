package redisstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// Effect reservations (see docs/idempotency.md, "Effect keys").
//
//	<prefix>E{H(tenant,tool,effect)}<scope of the effect>   → holder value
//
// The reservation has its own hash tag: every claim of the effect finds
// it, whatever slot its own record is in. On Redis Cluster the record and
// the reservation are therefore in different slots and cannot be one
// script; the claim takes them in two steps, record first:
//
//  1. claim.lua decides on the caller's record as ever. Anything but a
//     claim (a replay, in progress, a reused key …) is the answer, and the
//     effect is not touched.
//  2. A claim then takes the reservation (effect.lua: set if absent or
//     already naming this record). It runs its tool only once it holds
//     both. Finding another holder, it checks that holder's record: gone
//     (or replaced by other arguments) → the reservation is stale and is
//     replaced by compare and set; alive → the caller gives its own claim
//     back (Release) and answers as the holder (replay, in progress,
//     UNKNOWN, a takeover of its expired lease) or effect_conflict.
//
// No interleaving runs two: a claim runs only while the reservation names
// its record, the reservation names one record at a time, and it is taken
// from a holder only when that holder's record is gone. A gateway that
// dies between the steps leaves a claimed record without a reservation
// that never ran; its lease expires like any other.
//
// The reservation's TTL is its holder's plus effectMargin: set at the
// claim (lock + replay TTL) and extended in the pipeline of Complete and
// MarkUnknown (effect_keep.lua).

// effectMargin is how much longer than its holder's record a reservation
// lives, so it never expires first.
const effectMargin = time.Minute

// effectAttempts bounds the compare-and-set loop over stale holders.
const effectAttempts = 8

// effect returns the key of an effect's reservation.
func (k keyLayout) effect(scope idempotency.Scope, value string) string {
	b := make([]byte, 0, len(k.prefix)+tagLen+len(scope.Tenant)+len(scope.Tool)+len(value)+8)
	b = append(b, k.prefix...)
	b = append(b, "E{"...)
	b = append(b, tag(scope.Tenant, scope.Tool, value)...)
	b = append(b, '}')
	b = binary.AppendUvarint(b, uint64(len(scope.Tenant)))
	b = append(b, scope.Tenant...)
	b = binary.AppendUvarint(b, uint64(len(scope.Tool)))
	b = append(b, scope.Tool...)
	b = append(b, value...)
	return string(b)
}

// effectHolder is what a reservation names: the holder's record key name,
// its fingerprint, and the step it was claimed with (for a claim on it).
type effectHolder struct {
	record, fingerprint string
	step                *idempotency.Step
}

// encode packs h: each string uvarint-length-prefixed, then the step
// index (uvarint) when there is a session.
func (h effectHolder) encode() string {
	b := binary.AppendUvarint(nil, uint64(len(h.record)))
	b = append(b, h.record...)
	fp := packID(h.fingerprint)
	b = binary.AppendUvarint(b, uint64(len(fp)))
	b = append(b, fp...)
	if h.step != nil {
		session := packID(h.step.SessionID)
		b = binary.AppendUvarint(b, uint64(len(session)))
		b = append(b, session...)
		b = binary.AppendUvarint(b, h.step.Index)
	}
	return string(b)
}

// decodeEffectHolder is the inverse of encode.
func decodeEffectHolder(v string) (effectHolder, bool) {
	record, rest, ok1 := cutLenPrefixed(v)
	fp, rest, ok2 := cutLenPrefixed(rest)
	if !ok1 || !ok2 {
		return effectHolder{}, false
	}
	h := effectHolder{record: record}
	if h.fingerprint, ok1 = unpackID(fp); !ok1 {
		return effectHolder{}, false
	}
	if len(rest) == 0 {
		return h, true
	}
	session, rest, ok := cutLenPrefixed(rest)
	index, w := binary.Uvarint([]byte(rest))
	if !ok || w <= 0 || w != len(rest) {
		return effectHolder{}, false
	}
	id, ok := unpackID(session)
	if !ok {
		return effectHolder{}, false
	}
	h.step = &idempotency.Step{SessionID: id, Index: index}
	return h, true
}

// KeepsEffects reports that Claim honours idempotency.ClaimRequest.Effect.
func (s *Store) KeepsEffects() bool { return true }

var _ idempotency.EffectKeeper = (*Store)(nil)

// reserveEffect is step 2 for d, the claim of req on record.
func (s *Store) reserveEffect(ctx context.Context, req idempotency.ClaimRequest, record string, d idempotency.Decision) (idempotency.Decision, error) {
	key := s.keys.effect(req.Scope, req.Effect.Value)
	mine := effectHolder{record: record, fingerprint: req.Fingerprint, step: d.Lease.Step}.encode()
	ttl := millis(req.LockTTL+req.ReplayTTL) + millis(effectMargin)
	expect := ""
	for range effectAttempts {
		cmds, acked, err := s.evalReplicated(ctx, call(effectScript, []string{key}, effectArgs{Holder: mine, Expect: expect, TTLMS: ttl}))
		if err != nil {
			return s.giveBack(ctx, d, err)
		}
		if v, ok := cmds[0].Val().(int64); ok && v == 1 {
			if err := s.wait.check(acked); err != nil {
				return s.giveBack(ctx, d, err)
			}
			d.Lease.Effect = req.Effect
			return d, nil
		}
		value, err := cmds[0].Text()
		if err != nil {
			return s.giveBack(ctx, d, err)
		}
		decided, stale, err := s.decideByHolder(ctx, req, value)
		if err != nil {
			return s.giveBack(ctx, d, err)
		}
		if stale {
			expect = value
			continue
		}
		// The effect is another record's: this claim runs nothing.
		if err := s.Release(ctx, d.Lease); err != nil && !errors.Is(err, idempotency.ErrLeaseLost) {
			return idempotency.Decision{}, fmt.Errorf("redisstore: claim %v: give back the claim of a held effect: %w", req.Scope, err)
		}
		return decided, nil
	}
	return s.giveBack(ctx, d, errors.New("the effect's reservation kept changing"))
}

// giveBack releases a claim whose effect could not be settled, so no
// record is left claimed that nobody runs, and returns err.
func (s *Store) giveBack(ctx context.Context, d idempotency.Decision, err error) (idempotency.Decision, error) {
	if rerr := s.Release(ctx, d.Lease); rerr != nil && !errors.Is(rerr, idempotency.ErrLeaseLost) {
		err = errors.Join(err, rerr)
	}
	return idempotency.Decision{}, fmt.Errorf("redisstore: claim %v: effect: %w", d.Lease.Scope, err)
}

// decideByHolder answers req as the holder the reservation's value names,
// or reports the reservation stale (its holder's record is gone, or holds
// other arguments under the same key now).
func (s *Store) decideByHolder(ctx context.Context, req idempotency.ClaimRequest, value string) (idempotency.Decision, bool, error) {
	h, ok := decodeEffectHolder(value)
	if !ok {
		return idempotency.Decision{}, true, nil
	}
	scope, err := s.keys.parseRecord(h.record)
	if err != nil {
		return idempotency.Decision{}, true, nil
	}
	if h.fingerprint != req.Fingerprint {
		v, err := s.client.Get(ctx, h.record).Result()
		if errors.Is(err, redis.Nil) {
			return idempotency.Decision{}, true, nil
		}
		if err != nil {
			return idempotency.Decision{}, false, err
		}
		rec, err := recordOf(scope, v, time.Time{})
		if err != nil || rec.Fingerprint != h.fingerprint {
			return idempotency.Decision{}, true, nil
		}
		return idempotency.Decision{Outcome: idempotency.OutcomeEffectConflict,
			EffectHolder: &idempotency.EffectHolder{ExecutionID: rec.ExecutionID, State: rec.State}}, false, nil
	}
	// Same arguments: the holder's own retry decides (replay, in
	// progress, UNKNOWN, takeover of an expired lease).
	on := req
	on.Scope, on.Step, on.StepBoundKey = scope, h.step, true
	on.Approval, on.Effect = nil, nil
	on.Step = s.keys.slotStep(on)
	if s.keys.record(on.Scope, on.Step) != h.record {
		return idempotency.Decision{}, true, nil // not a name this store gives a claim
	}
	d, err := s.claimAt(ctx, on, h.record)
	if err != nil {
		return idempotency.Decision{}, false, err
	}
	switch d.Outcome {
	case idempotency.OutcomeKeyReused:
		return idempotency.Decision{}, true, nil
	case idempotency.OutcomeAwaitingApproval, idempotency.OutcomeApprovalDenied, idempotency.OutcomeApprovalExpired:
		d = idempotency.Decision{Outcome: idempotency.OutcomeInProgress, ExecutionID: d.ExecutionID, RetryAfter: time.Second}
	case idempotency.OutcomeClaimed:
		if !d.TakenOver { // no holder any more: this claim just made its record again
			if err := s.Release(ctx, d.Lease); err != nil && !errors.Is(err, idempotency.ErrLeaseLost) {
				return idempotency.Decision{}, false, err
			}
			return idempotency.Decision{}, true, nil
		}
		d.Lease.Effect = req.Effect
	}
	d.ByEffect = true
	return d, false, nil
}
