package redisreceipts

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"
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
	for _, tenant := range tenants {
		// The dedupe index is kept as long as the receipts.
		cutoff := strconv.FormatInt(before.UnixMilli()-1, 10)
		if err := s.client.ZRemRangeByScore(ctx, s.executedKey(tenant), "-inf", cutoff).Err(); err != nil {
			return total, fmt.Errorf("redisreceipts: expire %s executions: %w", tenant, err)
		}
		n, err := s.expireTenant(ctx, tenant, before)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

func (s *Store) expireTenant(ctx context.Context, tenant string, before time.Time) (int, error) {
	_, log := s.chainKeys(tenant)
	removed := 0
	for {
		batch, err := s.readAfter(ctx, log, 0, expireBatch)
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
		last := strconv.FormatInt(batch[old-1].Seq, 10)
		n, err := s.client.ZRemRangeByScore(ctx, log, "-inf", last).Result()
		removed += int(n)
		if err != nil {
			return removed, fmt.Errorf("redisreceipts: expire %s up to seq %s: %w", tenant, last, err)
		}
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
