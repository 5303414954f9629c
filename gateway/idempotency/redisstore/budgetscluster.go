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
	"github.com/toolgateway/toolgateway/gateway/redisscript"
)

// Budgets on Redis Cluster (docs/budgets.md, "Redis Cluster").
//
// A bucket <prefix>B{<bucket>} is a slot of its own, apart from the
// record's, so a claim's reservation cannot be one script. It is three
// steps, ordered so that no failure lets a bucket's sum exceed its limit
// and nothing runs unreserved:
//
//  1. In the claim's pipeline, budget_intent.lua (the record's slot)
//     writes into the record's charged hash which buckets the claim is to
//     charge, with each charge — before any bucket is touched. A takeover
//     or a claim again of the same record life gets that life's first
//     intent back instead (charged once per life).
//  2. budget_reserve.lua in each bucket's slot (one pipeline) adds the
//     entry <record>|<created µs> if the sum allows; an entry the life
//     holds already is kept (idempotent).
//  3. The tool runs only when every bucket reserved. One over its limit:
//     the claim is given back (Release), which deletes the record and its
//     charged hash, then drops the entries from the buckets it names
//     (budget_unreserve.lua; the release's second step).
//
// A gateway that dies after 1 leaves a claimed record that never ran,
// with an intent and no entries (or some): its lease expires, and the
// next claim reserves the intent again. One that dies in a release after
// deleting the record leaves entries whose record and charged hash are
// gone: counted (never over) until SweepBudgets drops them. An entry is
// dropped only when its record's life is gone and its charged hash no
// longer names it: the record was released or deleted (a record that
// merely expired keeps its charged hash, and its cost stays counted).

// budgetIntentArgs are budget_intent.lua's ARGV.
type budgetIntentArgs struct {
	Owner   string `lua:"owner"`   // packed owner token of the claim
	Head    string `lua:"head"`    // budgetHead
	Charges string `lua:"charges"` // encodeCharges
}

func (a budgetIntentArgs) Argv() []any { return []any{a.Owner, a.Head, a.Charges} }

// budgetReserveArgs are budget_reserve.lua's ARGV: one charge of
// encodeCharges, its entry and the force flag.
type budgetReserveArgs struct {
	Field  string `lua:"field"` // the entry: <record key>|<created µs>
	Limit  string `lua:"limit"`
	Cost   string `lua:"cost"`
	At     string `lua:"at"`
	Since  string `lua:"since"`
	Retain string `lua:"retain"`
	Force  string `lua:"force"`
}

func (a budgetReserveArgs) Argv() []any {
	return []any{a.Field, a.Limit, a.Cost, a.At, a.Since, a.Retain, a.Force}
}

// budgetUnreserveArgs are budget_unreserve.lua's ARGV.
type budgetUnreserveArgs struct {
	Field string `lua:"field"` // the entry: <record key>|<created µs>
}

func (a budgetUnreserveArgs) Argv() []any { return []any{a.Field} }

// budgetIntent is what budget_intent.lua answered for a claim the request
// owns: the record's entry name and the charges its life is to hold.
type budgetIntent struct {
	field   string
	charges []budgetReserveArgs
	buckets []string // the bucket key of each charge
}

// budgetIntentCall is the budget_intent.lua call for req's claim of record.
func (s *Store) budgetIntentCall(req idempotency.ClaimRequest, record string) (redisscript.Call, error) {
	charges, err := encodeCharges(req.Charges)
	if err != nil {
		return redisscript.Call{}, err
	}
	return call(budgetIntentScript, []string{record, s.keys.charged(record)},
		budgetIntentArgs{Owner: packID(req.Owner), Head: s.keys.budgetHead(), Charges: charges}), nil
}

// intentReply reads budget_intent.lua's answer: nil when the request does
// not own the record (nothing to charge).
func intentReply(record string, reply []string) (*budgetIntent, error) {
	if len(reply) == 1 && reply[0] == "none" {
		return nil, nil
	}
	if len(reply) < 3 || reply[0] != "life" {
		return nil, fmt.Errorf("%w: budget intent: %d fields", errBadReply, len(reply))
	}
	in := &budgetIntent{field: record + "|" + reply[1]}
	for _, spec := range reply[2:] {
		f := strings.Split(spec, "\x1f")
		if len(f) != 6 {
			return nil, fmt.Errorf("%w: budget intent: a charge of %d fields", errBadReply, len(f))
		}
		in.buckets = append(in.buckets, f[0])
		in.charges = append(in.charges, budgetReserveArgs{Field: in.field, Limit: f[1], Cost: f[2], At: f[3], Since: f[4], Retain: f[5]})
	}
	return in, nil
}

// reserveInBuckets is step 2: each of the intent's charges reserved in its
// bucket's slot, in one pipeline; force charges whatever the sums (an
// approved call). It answers the first budget over its limit (nil when
// all reserved); the entries others reserved stay until the claim is
// given back.
func (s *Store) reserveInBuckets(ctx context.Context, in *budgetIntent, force bool) (*idempotency.BudgetExceeded, error) {
	calls := make([]redisscript.Call, len(in.charges))
	for i, c := range in.charges {
		c.Force = flag(force)
		calls[i] = call(budgetReserveScript, []string{in.buckets[i]}, c)
	}
	cmds, err := s.evalEachReplicated(ctx, calls)
	if err != nil {
		return nil, fmt.Errorf("budget reserve: %w", err)
	}
	var over *idempotency.BudgetExceeded
	for i, cmd := range cmds {
		reply, err := cmd.StringSlice()
		if err != nil {
			return nil, fmt.Errorf("budget reserve: %w", err)
		}
		switch {
		case len(reply) == 1 && reply[0] == "reserved":
		case len(reply) == 2 && reply[0] == "exceeded":
			remaining, err := strconv.ParseInt(reply[1], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%w: budget reserve: remaining %q", errBadReply, reply[1])
			}
			if over == nil {
				over = &idempotency.BudgetExceeded{Budget: s.budgetOfBucket(in.buckets[i]), Remaining: remaining}
			}
		default:
			return nil, fmt.Errorf("%w: budget reserve: %d fields", errBadReply, len(reply))
		}
	}
	return over, nil
}

// evalEachReplicated runs calls, each on its own key's slot: in one
// pipeline, or with WaitReplicas set one by one, each followed by WAIT on
// its master's connection, so that a fail-over of a bucket's slot cannot
// lose an entry the claim then runs on. An answer from too few replicas
// is ErrNotReplicated (the caller gives the claim back).
func (s *Store) evalEachReplicated(ctx context.Context, calls []redisscript.Call) ([]*redis.Cmd, error) {
	if s.wait.replicas == 0 {
		return redisscript.Run(ctx, s.client, nil, calls...), nil
	}
	cmds := make([]*redis.Cmd, len(calls))
	for i, c := range calls {
		node, err := s.masterFor(ctx, c.Keys[0])
		if err != nil {
			return nil, err
		}
		cmd, acked, err := evalThenWait(ctx, node, c, s.wait)
		if err != nil {
			return nil, err
		}
		if err := s.wait.check(acked); err != nil {
			return nil, err
		}
		cmds[i] = cmd
	}
	return cmds, nil
}

// budgetOfBucket is the budget's name in a bucket key.
func (s *Store) budgetOfBucket(key string) string {
	return idempotency.BudgetOfBucket(strings.TrimPrefix(key, s.keys.budgetHead()))
}

// evalRelease runs a script that deletes a record (release, delete,
// reconcile_drop): 1 when it did, 0 when it did not. On Redis Cluster a
// record that held budget entries answers {1, entry, bucket...}: the
// record and its charged hash are gone, and its entries are dropped from
// their buckets here, the release's second step. Their failure is not the
// release's (the record is gone either way): the entries stay counted, in
// doubt, until SweepBudgets drops them.
func (s *Store) evalRelease(ctx context.Context, c redisscript.Call) (int, error) {
	cmds, err := s.eval(ctx, c)
	if err != nil {
		return 0, err
	}
	list, ok := cmds[0].Val().([]any)
	if !ok {
		return cmds[0].Int()
	}
	if len(list) < 3 {
		return 0, fmt.Errorf("%w: release: %d fields", errBadReply, len(list))
	}
	field, _ := list[1].(string)
	buckets := make([]string, 0, len(list)-2)
	for _, b := range list[2:] {
		if name, ok := b.(string); ok {
			buckets = append(buckets, name)
		}
	}
	_ = s.unreserve(ctx, field, buckets)
	return 1, nil
}

// unreserve drops the entry field from each bucket (one pipeline).
func (s *Store) unreserve(ctx context.Context, field string, buckets []string) error {
	if len(buckets) == 0 {
		return nil
	}
	calls := make([]redisscript.Call, len(buckets))
	for i, b := range buckets {
		calls[i] = call(budgetUnreserveScript, []string{b}, budgetUnreserveArgs{Field: field})
	}
	for _, cmd := range redisscript.Run(ctx, s.client, nil, calls...) {
		if err := cmd.Err(); err != nil {
			return fmt.Errorf("budget unreserve: %w", err)
		}
	}
	return nil
}

// budgetPattern is the SCAN pattern of the bucket keys.
func (k keyLayout) budgetPattern() string { return globEscape(k.prefix) + "B{*" }

// sweepBudgetsWithin is how old an entry the sweep judges at most: a
// record's charged hash is kept at least 24 hours past its charge (the
// shortest retention, see budgets.Set.Evaluate), so younger entries whose
// charged hash is gone were released, not expired.
const sweepBudgetsWithin = 23 * time.Hour

// SweepBudgets drops, on Redis Cluster, the bucket entries a release did
// not finish (a gateway died, or the bucket's slot failed, between
// deleting the record and dropping its entries): an entry whose record's
// life is gone and whose record's charged hash no longer names its
// bucket. It returns how many it dropped; on a single Redis (one script
// releases) it does nothing.
func (s *Store) SweepBudgets(ctx context.Context) (int, error) {
	if !s.keys.sessionSlots {
		return 0, nil
	}
	if err := s.ready(ctx); err != nil {
		return 0, fmt.Errorf("redisstore: sweep budgets: %w", err)
	}
	nodes, err := s.scanNodes(ctx)
	if err != nil {
		return 0, fmt.Errorf("redisstore: sweep budgets: %w", err)
	}
	dropped, err := scanEach(ctx, nodes, s.keys.budgetPattern(), func(ctx context.Context, _ *redis.Client, buckets []string) (int, error) {
		n := 0
		for _, bucket := range buckets {
			dropped, err := s.sweepBucket(ctx, bucket)
			n += dropped
			if err != nil {
				return n, err
			}
		}
		return n, nil
	})
	if err != nil {
		return dropped, fmt.Errorf("redisstore: sweep budgets: %w", err)
	}
	return dropped, nil
}

// sweepBucket drops the unsettled entries of one bucket whose release
// did not finish (see SweepBudgets).
func (s *Store) sweepBucket(ctx context.Context, bucket string) (int, error) {
	all, err := s.client.HGetAll(ctx, bucket).Result()
	if err != nil {
		return 0, err
	}
	type entry struct {
		field, life string
		record      *redis.StringCmd
		charged     *redis.StringCmd
	}
	recent := time.Now().Add(-sweepBudgetsWithin).UnixMicro()
	var entries []*entry
	pipe := s.client.Pipeline()
	for field, value := range all {
		rec, life, ok := cutLast(field, "|")
		_, atText, ok2 := strings.Cut(value, ":")
		at, err := strconv.ParseInt(atText, 10, 64)
		if field == "=" || !ok || !ok2 || err != nil || at < recent || !strings.HasPrefix(rec, s.keys.prefix+"R") {
			continue
		}
		e := &entry{field: field, life: life, record: pipe.Get(ctx, rec), charged: pipe.HGet(ctx, s.keys.charged(rec), bucket)}
		entries = append(entries, e)
	}
	if len(entries) == 0 {
		return 0, nil
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return 0, err
	}
	var stale []string
	for _, e := range entries {
		if v, err := e.record.Result(); err == nil {
			if p, err := decodePacked(v); err != nil || strconv.FormatInt(p.created, 10) == e.life {
				continue // its record lives (or cannot be read: left alone)
			}
		} else if !errors.Is(err, redis.Nil) {
			continue
		}
		if v, err := e.charged.Result(); err == nil && (v == e.life || strings.HasPrefix(v, e.life+"\x1f")) {
			continue // an expired record's charge: it stays counted
		} else if err != nil && !errors.Is(err, redis.Nil) {
			continue
		}
		stale = append(stale, e.field)
	}
	dropped := 0
	for _, field := range stale {
		if err := s.unreserve(ctx, field, []string{bucket}); err != nil {
			return dropped, err
		}
		dropped++
	}
	return dropped, nil
}
