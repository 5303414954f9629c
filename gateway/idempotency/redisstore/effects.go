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
//	<prefix>E{H(tenant,tool,effect)}<scope of the effect>   → a take of its holder (effectTake)
//
// The reservation has its own hash tag: every claim of the effect finds
// it, whatever slot its own record is in. On Redis Cluster the record and
// the reservation are therefore in different slots and cannot be one
// script; the claim takes them in two steps, record first:
//
//  1. claim.lua decides on the caller's record as ever. Anything but a
//     claim or a pending approval (a replay, in progress, a reused key …)
//     is the answer, and the effect is not touched.
//  2. A claim (or a call now waiting for approval) then takes the
//     reservation (effect.lua: set if absent or already naming this
//     record). It runs its tool only once it holds both. Finding another
//     holder, it checks that holder's record: gone (or replaced by other
//     arguments) → the reservation is stale and is replaced by compare and
//     set; alive → the caller gives its own claim back (unclaim: released,
//     an approval it consumed put back, a pending approval it just wrote
//     withdrawn) and answers as the holder (replay, in progress, UNKNOWN,
//     a takeover of its expired lease) or effect_conflict.
//
// No interleaving runs two: a claim runs only while the reservation names
// its record, the reservation names one record at a time, and it is taken
// from a holder only when that holder's record is gone. A gateway that
// dies between the steps leaves a claimed record without a reservation
// that never ran; its lease expires like any other.
//
// The reservation has no TTL, so it lives at least as long as its holder's
// record whatever extends that record and in whatever slot: a completion
// (late ones too), an UNKNOWN marking, a takeover, a resolve, a
// reconciliation. No script that extends a record needs to know about
// effects, and no crash between two steps can leave a live holder without
// its reservation. It is removed only once its holder is gone: by the
// holder's Release (effect_drop.lua, after the record's release), replaced
// by the next claim of the value that finds the holder gone, or removed by
// SweepEffects (the store's background sweep) after the record was
// deleted or expired.

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

// decodeEffectHolder decodes a reservation's value (a take, or an
// earlier build's bare identity) into the holder it names.
func decodeEffectHolder(v string) (effectHolder, bool) {
	_, identity, ok := cutTake(v)
	if !ok {
		return effectHolder{}, false
	}
	record, rest, ok1 := cutLenPrefixed(identity)
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

// effectTake is the value a claim writes into a reservation: "\x00", the
// claim's packed owner token (one length byte: claims refuse owners above
// 255 packed bytes), then the holder's identity (encode). The owner token
// makes each take of one holder distinct, so a compare and set, a sweep
// or a release that judged an earlier take never removes a later one.
func effectTake(owner, identity string) string {
	o := packID(owner)
	b := make([]byte, 0, 2+len(o)+len(identity))
	b = append(b, 0, byte(len(o)))
	b = append(b, o...)
	return string(append(b, identity...))
}

// cutTake splits a reservation's value into the packed owner token of its
// take and the holder's identity; a value without a take (written by an
// earlier build) is all identity, with owner "".
func cutTake(v string) (owner, identity string, ok bool) {
	if len(v) == 0 || v[0] != 0 {
		return "", v, true
	}
	if len(v) < 2 || len(v) < 2+int(v[1]) {
		return "", "", false
	}
	n := int(v[1])
	return v[2 : 2+n], v[2+n:], true
}

// lenPrefixed is s as encode writes a field: uvarint length, then s.
func lenPrefixed(s string) string {
	return string(binary.AppendUvarint(nil, uint64(len(s)))) + s
}

// KeepsEffects reports that Claim honours idempotency.ClaimRequest.Effect.
func (s *Store) KeepsEffects() bool { return true }

var _ idempotency.EffectKeeper = (*Store)(nil)

// reserveEffect is step 2 for c, the claim of req on its record.
func (s *Store) reserveEffect(ctx context.Context, req idempotency.ClaimRequest, c recordClaim) (idempotency.Decision, error) {
	d := c.d
	key := s.keys.effect(req.Scope, req.Effect.Value)
	mine := effectHolder{record: c.record, fingerprint: req.Fingerprint, step: c.step}.encode()
	take := effectTake(req.Owner, mine)
	expect := ""
	for range effectAttempts {
		cmds, acked, err := s.evalReplicated(ctx, call(effectScript, []string{key}, effectArgs{Holder: mine, Take: take, Expect: expect}))
		if err != nil {
			return s.giveBack(ctx, c, err)
		}
		if v, ok := cmds[0].Val().(int64); ok && v == 1 {
			if err := s.wait.check(acked); err != nil {
				return s.giveBack(ctx, c, err)
			}
			if d.Outcome == idempotency.OutcomeClaimed {
				d.Lease.Effect = req.Effect
			}
			return d, nil
		}
		value, err := cmds[0].Text()
		if err != nil {
			return s.giveBack(ctx, c, err)
		}
		decided, stale, err := s.decideByHolder(ctx, req, value)
		if err != nil {
			return s.giveBack(ctx, c, err)
		}
		if stale {
			expect = value
			continue
		}
		// The effect is another record's: this claim runs nothing (and a
		// pending approval it just wrote asks nobody).
		if err := s.unclaim(ctx, c); err != nil {
			return idempotency.Decision{}, fmt.Errorf("redisstore: claim %v: give back the claim of a held effect: %w", req.Scope, err)
		}
		return decided, nil
	}
	return s.giveBack(ctx, c, errors.New("the effect's reservation kept changing"))
}

// giveBack gives back a claim whose effect could not be settled (unclaim),
// so no record is left claimed that nobody runs, and returns err.
func (s *Store) giveBack(ctx context.Context, c recordClaim, err error) (idempotency.Decision, error) {
	if uerr := s.unclaim(ctx, c); uerr != nil {
		err = errors.Join(err, uerr)
	}
	return idempotency.Decision{}, fmt.Errorf("redisstore: claim %v: effect: %w", c.d.Lease.Scope, err)
}

// unclaim undoes the record's claim of d, which runs nothing: a claim
// that consumed an approval puts the approval back as it was (restore.lua:
// the call's approval is its own, and losing an effect race must not make
// a person decide it again; the embedded and PostgreSQL stores never
// consume it in that case); any other claim is released. A lease lost
// meanwhile is no error: the record is someone else's now.
func (s *Store) unclaim(ctx context.Context, c recordClaim) error {
	var err error
	switch {
	case c.d.Outcome == idempotency.OutcomeAwaitingApproval && !c.newPending:
		return nil // an earlier request's pending approval: it stays the call's
	case c.d.Outcome == idempotency.OutcomeAwaitingApproval:
		err = s.withdrawPending(ctx, c)
	case c.consumed != "":
		err = s.restoreApproval(ctx, c.d.Lease, c.consumed)
	default:
		err = s.Release(ctx, c.d.Lease)
	}
	if errors.Is(err, idempotency.ErrLeaseLost) {
		return nil
	}
	return err
}

// dropEffect removes lease's reservation after its record was released,
// if it is still the take of lease's claim (effect_drop.lua). A take by
// another claim stays: a later claim of the same record, or another
// record's (a reservation this lease did not take, e.g. after a takeover
// by effect, is left to the sweep).
func (s *Store) dropEffect(ctx context.Context, lease idempotency.Lease) error {
	record := s.keys.record(lease.Scope, lease.Step)
	_, err := s.evalInt(ctx, call(effectDropScript, []string{s.keys.effect(lease.Scope, lease.Effect.Value)},
		effectDropArgs{Owner: packID(lease.Owner), Record: lenPrefixed(record)}))
	return err
}

// effectPattern is the SCAN pattern of the reservation keys.
func (k keyLayout) effectPattern() string { return globEscape(k.prefix) + "E{*" }

// sweepCount is SweepEffects' SCAN COUNT per round trip.
const sweepCount = 1000

// SweepEffects removes the reservations whose holder's record is gone
// (deleted by an operator or by reconciliation, or expired): a
// reservation has no TTL (see above), so without the sweep it would stay
// until the next claim of its value. A reservation is removed only if it
// still holds the value that named the missing record (effect_drop.lua),
// so one a claim took meanwhile stays. It returns how many it removed.
func (s *Store) SweepEffects(ctx context.Context) (int, error) {
	if err := s.ready(ctx); err != nil {
		return 0, fmt.Errorf("redisstore: sweep effects: %w", err)
	}
	nodes, err := s.scanNodes(ctx)
	if err != nil {
		return 0, fmt.Errorf("redisstore: sweep effects: %w", err)
	}
	removed, err := scanEach(ctx, nodes, s.keys.effectPattern(), s.sweepBatch)
	if err != nil {
		return removed, fmt.Errorf("redisstore: sweep effects: %w", err)
	}
	return removed, nil
}

// scanEach SCANs every node for pattern (sweepCount a round trip) and
// hands each batch of names to batch, summing what it counts.
func scanEach(ctx context.Context, nodes []*redis.Client, pattern string, batch func(context.Context, *redis.Client, []string) (int, error)) (int, error) {
	total := 0
	for _, node := range nodes {
		var cursor uint64
		for {
			names, next, err := node.Scan(ctx, cursor, pattern, sweepCount).Result()
			if err != nil {
				return total, fmt.Errorf("scan: %w", err)
			}
			n, err := batch(ctx, node, names)
			total += n
			if err != nil {
				return total, err
			}
			if cursor = next; cursor == 0 {
				break
			}
		}
	}
	return total, nil
}

// sweepBatch removes the stale reservations among names (keys of node).
func (s *Store) sweepBatch(ctx context.Context, node *redis.Client, names []string) (int, error) {
	if len(names) == 0 {
		return 0, nil
	}
	values := make([]*redis.StringCmd, len(names))
	if _, err := node.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for i, name := range names {
			values[i] = pipe.Get(ctx, name)
		}
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return 0, err
	}
	type candidate struct {
		name, owner, record string
		exists              *redis.IntCmd
	}
	var candidates []candidate
	if _, err := s.client.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for i, name := range names {
			value, err := values[i].Result()
			if err != nil {
				continue // gone meanwhile
			}
			h, ok := decodeEffectHolder(value)
			if !ok {
				continue // not ours to judge: the claims replace it
			}
			if _, err := s.keys.parseRecord(h.record); err != nil {
				continue
			}
			owner, _, _ := cutTake(value)
			candidates = append(candidates, candidate{name: name, owner: owner, record: h.record, exists: pipe.Exists(ctx, h.record)})
		}
		return nil
	}); err != nil {
		return 0, err
	}
	removed := 0
	for _, c := range candidates {
		if c.exists.Val() != 0 {
			continue
		}
		// Only this take: a claim of the record since took it again under
		// its own owner token, and that take stays.
		n, err := s.evalInt(ctx, call(effectDropScript, []string{c.name}, effectDropArgs{Owner: c.owner, Record: lenPrefixed(c.record)}))
		if err != nil {
			return removed, err
		}
		removed += n
	}
	return removed, nil
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
	// holder_only: the script consumes no approval of the holder's (it
	// answers awaiting_approval for a pending or approved one) and writes
	// no record where the holder's is gone (no outcome).
	c, err := s.claimAt(ctx, on, h.record, true)
	if err != nil {
		return idempotency.Decision{}, false, err
	}
	d := c.d
	switch d.Outcome {
	case 0, idempotency.OutcomeKeyReused: // the holder is gone, or holds other arguments now
		return idempotency.Decision{}, true, nil
	case idempotency.OutcomeAwaitingApproval, idempotency.OutcomeApprovalDenied, idempotency.OutcomeApprovalExpired:
		// Another call of the action waits for a person: this one waits
		// too, and never decides or consumes that approval.
		d = idempotency.Decision{Outcome: idempotency.OutcomeInProgress, ExecutionID: d.ExecutionID, RetryAfter: time.Second}
	case idempotency.OutcomeClaimed:
		if !d.TakenOver { // not an answer holder_only gives; never run on it
			if err := s.unclaim(ctx, c); err != nil {
				return idempotency.Decision{}, false, err
			}
			return idempotency.Decision{}, true, nil
		}
		d.Lease.Effect = req.Effect
	}
	d.ByEffect = true
	return d, false, nil
}

// withdrawArgs are withdraw.lua's ARGV.
type withdrawArgs struct {
	Exec string `lua:"exec"` // packed execution id of the request that wrote it
	stepArgs
}

func (a withdrawArgs) Argv() []any { return []any{a.Exec, a.StepHead, a.Tenant} }

// withdrawPending deletes the pending approval c's claim just wrote, if it
// is still pending under that request (withdraw.lua): another record
// holds the call's effect, so nobody is to be asked. Its index entries
// are removed too.
func (s *Store) withdrawPending(ctx context.Context, c recordClaim) error {
	n, err := s.evalInt(ctx, call(withdrawScript, []string{c.record},
		withdrawArgs{Exec: packID(c.d.ExecutionID), stepArgs: s.keys.stepArgs(c.tenant)}))
	if err == nil && n == 1 && c.d.Approval != nil {
		// Best effort, as unindexPending: a listing skips an entry whose
		// record is gone, and every entry expires.
		member := indexMember(c.d.Approval)
		_, _ = s.client.Pipelined(ctx, func(pipe redis.Pipeliner) error {
			pipe.ZRem(ctx, s.keys.pendingIndex(), member)
			pipe.ZRem(ctx, s.keys.allIndex(), member)
			pipe.Del(ctx, s.keys.approval(c.d.Approval.ID))
			return nil
		})
	}
	return err
}

// restoreArgs are restore.lua's ARGV.
type restoreArgs struct {
	ownerCheck
	Block string `lua:"block"` // the APPROVAL block as the claim consumed it
	stepArgs
}

func (a restoreArgs) Argv() []any { return []any{a.Owner, a.Fence, a.Block, a.StepHead, a.Tenant} }

// restoreApproval puts block back on lease's record (restore.lua); a lease
// lost meanwhile is ErrLeaseLost.
func (s *Store) restoreApproval(ctx context.Context, lease idempotency.Lease, block string) error {
	ok, err := s.evalInt(ctx, call(restoreScript, []string{s.keys.record(lease.Scope, lease.Step)},
		restoreArgs{ownerCheck: ownerOf(lease), Block: block, stepArgs: s.keys.stepArgs(lease.Scope.Tenant)}))
	return ownedResult("restore approval", lease, ok, err)
}
