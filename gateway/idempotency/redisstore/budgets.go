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

// KeepsBudgets reports whether Claim honours idempotency.ClaimRequest.Charges:
// always. On a single Redis budget.lua runs in the claim's pipeline and
// reads the record and any bucket; on Redis Cluster, where a bucket lives
// in a slot of its own, the reservation takes steps whose failures are
// recovered (budgetscluster.go).
func (s *Store) KeepsBudgets() bool { return true }

var _ idempotency.BudgetKeeper = (*Store)(nil)

// charged names the hash of the budget buckets the record rec charged: rec's
// name with its "R" turned "C", so on a cluster it shares rec's slot.
func (k keyLayout) charged(rec string) string {
	return k.prefix + "C" + rec[len(k.prefix)+1:]
}

// budgetHead is what every budget bucket's key name starts with.
func (k keyLayout) budgetHead() string { return k.prefix + "B{" }

// budgetArgs are budget.lua's ARGV.
type budgetArgs struct {
	Owner   string `lua:"owner"`   // packed owner token of the claim
	Head    string `lua:"head"`    // budgetHead
	Charges string `lua:"charges"` // encodeCharges
	Force   string `lua:"force"`   // "1": charge whatever the sums
}

func (a budgetArgs) Argv() []any { return []any{a.Owner, a.Head, a.Charges, a.Force} }

// encodeCharges is budget.lua's charges argument: per charge its bucket,
// limit, cost, time (µs), window start (µs, see since) and retention (ms), fields
// split by \x1f and charges by \x1e. A bucket holding either (a tenant
// name with a control character) is refused rather than misread.
func encodeCharges(charges []idempotency.Charge) (string, error) {
	var b strings.Builder
	for i, c := range charges {
		if strings.ContainsAny(c.Bucket, "\x1e\x1f") {
			return "", fmt.Errorf("budget bucket of %q holds a control character", c.Budget)
		}
		if i > 0 {
			b.WriteByte('\x1e')
		}
		for j, f := range []string{c.Bucket, strconv.FormatInt(c.Limit, 10), strconv.FormatInt(c.Cost, 10),
			strconv.FormatInt(c.At.UnixMicro(), 10), strconv.FormatInt(since(c), 10), strconv.FormatInt(c.Retain.Milliseconds(), 10)} {
			if j > 0 {
				b.WriteByte('\x1f')
			}
			b.WriteString(f)
		}
	}
	return b.String(), nil
}

// since is a charge's window start for budget.lua: -1 for a calendar
// window, whose bucket is the window, so the script reads the bucket's
// running total instead of summing its entries.
func since(c idempotency.Charge) int64 {
	if !c.Rolling {
		return -1
	}
	return c.Since.UnixMicro()
}

// budgetCall is the budget.lua call for req's claim of record.
func (s *Store) budgetCall(req idempotency.ClaimRequest, record string, force bool) (redisscript.Call, error) {
	charges, err := encodeCharges(req.Charges)
	if err != nil {
		return redisscript.Call{}, err
	}
	return call(budgetScript, []string{record, s.keys.charged(record)},
		budgetArgs{Owner: packID(req.Owner), Head: s.keys.budgetHead(), Charges: charges, Force: flag(force)}), nil
}

// budgetReply reads budget.lua's answer: nil when the charges are
// reserved (or there was nothing to charge), else the budget over its
// limit.
func budgetReply(req idempotency.ClaimRequest, reply []string) (*idempotency.BudgetExceeded, error) {
	if len(reply) == 0 {
		return nil, fmt.Errorf("%w: budget: empty", errBadReply)
	}
	if reply[0] != "exceeded" {
		return nil, nil
	}
	if len(reply) != 3 {
		return nil, fmt.Errorf("%w: budget: %d fields", errBadReply, len(reply))
	}
	i, err1 := strconv.Atoi(reply[1])
	remaining, err2 := strconv.ParseInt(reply[2], 10, 64)
	if err1 != nil || err2 != nil || i < 1 || i > len(req.Charges) {
		return nil, fmt.Errorf("%w: budget: index %q, remaining %q", errBadReply, reply[1], reply[2])
	}
	return &idempotency.BudgetExceeded{Budget: req.Charges[i-1].Budget, Remaining: remaining}, nil
}

// settleBudget acts on a claim whose charges budget.lua refused: an
// approved call (the claim consumed an approval a human granted) is
// charged anyway, in one more step; any other claim is given back (its
// record released, so nothing runs and nothing is held; a consumed
// pending approval goes with it) and answers budget_exceeded.
func (s *Store) settleBudget(ctx context.Context, req idempotency.ClaimRequest, c recordClaim, over *idempotency.BudgetExceeded) (idempotency.Decision, error) {
	if c.consumed != "" && c.d.Approval != nil && c.d.Approval.DecidedBy != "" {
		if c.intent != nil { // Redis Cluster
			if _, err := s.reserveInBuckets(ctx, c.intent, true); err != nil {
				_ = s.Release(ctx, c.d.Lease)
				return idempotency.Decision{}, fmt.Errorf("redisstore: claim %v: charge the approved call: %w", req.Scope, err)
			}
			return c.d, nil
		}
		bc, err := s.budgetCall(req, c.record, true)
		if err != nil {
			return idempotency.Decision{}, err
		}
		if _, err := s.eval(ctx, bc); err != nil {
			return idempotency.Decision{}, fmt.Errorf("redisstore: claim %v: charge the approved call: %w", req.Scope, err)
		}
		return c.d, nil
	}
	if err := s.Release(ctx, c.d.Lease); err != nil {
		return idempotency.Decision{}, fmt.Errorf("redisstore: claim %v: give back a claim over its budget: %w", req.Scope, err)
	}
	return idempotency.Decision{Outcome: idempotency.OutcomeBudgetExceeded, Budget: over}, nil
}

// BudgetUsage reads the bucket's hash and, in one pipeline, the records
// its entries name: an entry whose record still lives the same life
// (created µs) COMPLETED is used, any other is held (a record gone
// without a release may have acted, so it is reported as open).
func (s *Store) BudgetUsage(ctx context.Context, bucket string, since time.Time, rolling bool) (idempotency.BudgetUsage, error) {
	var u idempotency.BudgetUsage
	all, err := s.client.HGetAll(ctx, s.keys.budgetHead()+bucket+"}").Result()
	if err != nil {
		return u, fmt.Errorf("redisstore: budget usage: %w", err)
	}
	type entry struct {
		rec     string
		created int64
		cost    int64
	}
	var entries []entry
	for field, value := range all {
		costText, atText, ok := strings.Cut(value, ":")
		rec, life, ok2 := cutLast(field, "|")
		cost, err1 := strconv.ParseInt(costText, 10, 64)
		at, err2 := strconv.ParseInt(atText, 10, 64)
		created, err3 := strconv.ParseInt(life, 10, 64)
		if field == "=" || !ok || !ok2 || err1 != nil || err2 != nil || err3 != nil {
			continue // the running total, or not an entry
		}
		if rolling && at < since.UnixMicro() {
			continue
		}
		u.Reserved += cost
		entries = append(entries, entry{rec, created, cost})
	}
	if len(entries) == 0 {
		return u, nil
	}
	pipe := s.client.Pipeline()
	gets := make([]*redis.StringCmd, len(entries))
	for i, e := range entries {
		gets[i] = pipe.Get(ctx, e.rec)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return idempotency.BudgetUsage{}, fmt.Errorf("redisstore: budget usage: %w", err)
	}
	for i, e := range entries {
		v, err := gets[i].Result()
		if err == nil {
			if p, err := decodePacked(v); err == nil && p.state == 'C' && p.created == e.created {
				continue
			}
		}
		u.Held += e.cost
	}
	return u, nil
}

// cutLast cuts s around the last sep.
func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return s, "", false
}

// Reservations reads the newest record holding scope, its charged hash,
// and then the record life's entry in each bucket the hash names (one
// pipeline; on a Cluster each in its bucket's slot): what the buckets
// hold for it, so an intent whose bucket never reserved (Cluster, a
// claim that failed between its steps) counts nothing.
func (s *Store) Reservations(ctx context.Context, scope idempotency.Scope) ([]idempotency.Reservation, error) {
	if err := s.ready(ctx); err != nil {
		return nil, fmt.Errorf("redisstore: reservations %v: %w", scope, err)
	}
	found, err := s.find(ctx, scope)
	if err != nil {
		return nil, fmt.Errorf("redisstore: reservations %v: %w", scope, err)
	}
	if len(found) == 0 {
		return nil, idempotency.ErrNotFound
	}
	rec := newest(found)
	life := strconv.FormatInt(rec.record.CreatedAt.UnixMicro(), 10)
	charged, err := s.client.HGetAll(ctx, s.keys.charged(rec.key)).Result()
	if err != nil {
		return nil, fmt.Errorf("redisstore: reservations %v: %w", scope, err)
	}
	var buckets []string
	for bucket, value := range charged {
		// The value is the life (budget.lua) or the life and the intended
		// charge (budget_intent.lua).
		if v, _, _ := strings.Cut(value, "\x1f"); v == life {
			buckets = append(buckets, bucket)
		}
	}
	if len(buckets) == 0 {
		return nil, nil
	}
	pipe := s.client.Pipeline()
	entries := make([]*redis.StringCmd, len(buckets))
	for i, b := range buckets {
		entries[i] = pipe.HGet(ctx, b, rec.key+"|"+life)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("redisstore: reservations %v: %w", scope, err)
	}
	var out []idempotency.Reservation
	for i, b := range buckets {
		v, err := entries[i].Result()
		if err != nil {
			continue // not reserved in this bucket
		}
		costText, _, _ := strings.Cut(v, ":")
		cost, err := strconv.ParseInt(costText, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: budget entry of %q", errBadReply, s.budgetOfBucket(b))
		}
		out = append(out, idempotency.Reservation{Budget: s.budgetOfBucket(b), Cost: cost})
	}
	return out, nil
}
