package redisreceipts

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/receipts"
)

// expireBatch is how many receipts Expire reads per round trip.
const expireBatch = 500

// Expire implements [receipts.Store]: per tenant, it removes the longest
// run of oldest receipts sealed before before, so what stays is a
// contiguous chain even when writers' clocks disagree.
func (s *Store) Expire(ctx context.Context, before time.Time) (int, error) {
	listed, err := s.Tenants(ctx)
	if err != nil {
		return 0, err
	}
	// A chain whose listing was removed by hand is still in the
	// checkpoint index: it expires too.
	checkpointed, err := s.CheckpointTenants(ctx)
	if err != nil {
		return 0, err
	}
	tenants := slices.Compact(slices.Sorted(slices.Values(append(listed, checkpointed...))))
	total := 0
	// Segments the writer did not compact are compacted here first; a
	// failure does not hold expiry up, and is answered once every chain
	// expired.
	var compactErr error
	for _, tenant := range tenants {
		if _, err := s.compactTenant(ctx, tenant); err != nil && compactErr == nil {
			compactErr = err
		}
		// The dedupe index is kept for its window (dedupe.go).
		cutoff := strconv.FormatInt(s.clock().Add(-dedupeWindow).UnixMilli()-1, 10)
		if err := s.client.ZRemRangeByScore(ctx, s.executedKey(tenant), "-inf", cutoff).Err(); err != nil {
			return total, fmt.Errorf("redisreceipts: expire %s executions: %w", tenant, err)
		}
		n, err := s.expireTenant(ctx, tenant, before)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, compactErr
}

func (s *Store) expireTenant(ctx context.Context, tenant string, before time.Time) (int, error) {
	_, log := s.chainKeys(tenant)
	removed := 0
	for {
		batch, _, err := s.readAfter(ctx, tenant, 0, expireBatch)
		if err != nil {
			return removed, err
		}
		old := 0
		for old < len(batch) && batch[old].Time.Before(before) {
			old++
		}
		if old == 0 {
			return removed, nil
		}
		// Appends only add above the head, so the range read is still the
		// chain's oldest.
		cut := batch[old-1].Seq
		last := strconv.FormatInt(cut, 10)
		if err := s.client.ZRemRangeByScore(ctx, log, "-inf", last).Err(); err != nil {
			return removed, fmt.Errorf("redisreceipts: expire %s up to seq %s: %w", tenant, last, err)
		}
		if err := s.expireSegments(ctx, tenant, cut); err != nil {
			return removed, err
		}
		removed += old
		// The checkpoints of expired receipts go too, but the one of the
		// last expired receipt, which vouches for the kept chain's anchor.
		if err := s.client.ZRemRangeByScore(ctx, s.checkpointsKey(tenant), "-inf", "("+last).Err(); err != nil {
			return removed, fmt.Errorf("redisreceipts: expire %s checkpoints below seq %s: %w", tenant, last, err)
		}
		if old < len(batch) {
			return removed, nil
		}
	}
}

// expireSegments removes the sealed segments of tenant's chain up to seq
// cut; the segment cut falls inside keeps its receipts after cut, sealed
// again (what stays of a chain starts with its anchor, as on every store).
func (s *Store) expireSegments(ctx context.Context, tenant string, cut int64) error {
	key := s.segmentsKey(tenant)
	zs, err := s.client.ZRangeByScoreWithScores(ctx, key, &redis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt((cut-1)/segmentSize, 10)}).Result()
	if err != nil {
		return fmt.Errorf("redisreceipts: expire %s segments up to seq %d: %w", tenant, cut, err)
	}
	for _, z := range zs {
		blob, _ := z.Member.(string)
		lines, err := decodeSegment(tenant, []byte(blob))
		if err != nil {
			return fmt.Errorf("redisreceipts: expire %s segment %.0f: %w", tenant, z.Score, err)
		}
		var kept []string
		for _, l := range lines {
			if l.seq > cut {
				kept = append(kept, string(l.line))
			}
		}
		_, err = s.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.ZRem(ctx, key, blob)
			if len(kept) == 0 {
				return nil
			}
			if compacted, ok, err := encodeSegment(tenant, kept); ok && err == nil {
				p.ZAdd(ctx, key, redis.Z{Score: z.Score, Member: string(compacted)})
				return nil
			}
			_, log := s.chainKeys(tenant)
			for _, line := range kept { // not re-derivable as a segment: kept as lines
				r, _ := receipts.Decode([]byte(line))
				p.ZAdd(ctx, log, redis.Z{Score: float64(r.Seq), Member: line})
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("redisreceipts: expire %s segment %.0f: %w", tenant, z.Score, err)
		}
	}
	return nil
}
