package redisreceipts

import (
	"context"
	"crypto/sha1" //nolint:gosec // compact.lua compares with redis.sha1hex: a check of what was read, not a security boundary
	_ "embed"     // the compaction script lives in lua/compact.lua
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed lua/compact.lua
	compactLua    string
	compactScript = redis.NewScript(compactLua)
)

// segmentsKey is the sorted set of tenant's sealed segments.
func (s *Store) segmentsKey(tenant string) string { return s.chainTag(tenant) + ":segments" }

// compactAfterRun compacts the segments an append of the seqs first to
// last completed: those whose last seq is now below the head. It runs on
// the writer's goroutine, off the call path, once per segmentSize
// receipts of a chain; a segment it fails to compact stays as lines,
// which read the same, until the hourly expiry compacts it.
func (s *Store) compactAfterRun(ctx context.Context, tenant string, first, last int64) {
	// Segment m-1 ends at seq m*segmentSize: completed when the run
	// moved the head from first-1 past it.
	for m := (first - 1 + segmentSize - 1) / segmentSize; m*segmentSize <= last-1; m++ {
		if m >= 1 {
			_, _ = s.compact(ctx, tenant, m-1)
		}
	}
}

// compactTenant compacts every full segment of tenant's chain still
// stored as lines below its last line: the hourly catch-up.
func (s *Store) compactTenant(ctx context.Context, tenant string) (int, error) {
	_, log := s.chainKeys(tenant)
	lowest, err := s.client.ZRangeWithScores(ctx, log, 0, 0).Result()
	if err != nil || len(lowest) == 0 {
		return 0, wrapCompact(tenant, err)
	}
	highest, err := s.client.ZRevRangeWithScores(ctx, log, 0, 0).Result()
	if err != nil || len(highest) == 0 {
		return 0, wrapCompact(tenant, err)
	}
	compacted := 0
	for n := (int64(lowest[0].Score) - 1) / segmentSize; (n+1)*segmentSize < int64(highest[0].Score); n++ {
		ok, err := s.compact(ctx, tenant, n)
		if err != nil {
			return compacted, err
		}
		if ok {
			compacted++
		}
	}
	return compacted, nil
}

func wrapCompact(tenant string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("redisreceipts: compact %s: %w", tenant, err)
}

// compact replaces segment n of tenant's chain by its compact form when
// its lines are all there, each at its seq, and re-derive exactly from
// it; ok is false when they do not (left as lines).
func (s *Store) compact(ctx context.Context, tenant string, n int64) (ok bool, err error) {
	_, log := s.chainKeys(tenant)
	lo, hi := n*segmentSize+1, (n+1)*segmentSize
	zs, err := s.client.ZRangeByScoreWithScores(ctx, log, &redis.ZRangeBy{
		Min: strconv.FormatInt(lo, 10), Max: strconv.FormatInt(hi, 10),
	}).Result()
	if err != nil || len(zs) != segmentSize {
		return false, wrapCompact(tenant, err)
	}
	lines := make([]string, len(zs))
	for i, z := range zs {
		if int64(z.Score) != lo+int64(i) {
			return false, nil
		}
		lines[i], _ = z.Member.(string)
	}
	blob, ok, err := encodeSegment(tenant, lines)
	if !ok || err != nil {
		return false, wrapCompact(tenant, err)
	}
	digest := sha1.Sum([]byte(strings.Join(lines, "\n"))) //nolint:gosec // see the import
	done, err := compactScript.Run(ctx, s.client, []string{log, s.segmentsKey(tenant)},
		lo, hi, hex.EncodeToString(digest[:]), n, blob).Int()
	if err != nil {
		return false, wrapCompact(tenant, err)
	}
	return done == 1, nil
}
