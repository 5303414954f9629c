package redisreceipts

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/receipts"
)

// List implements [receipts.Store]: one page of [Store.Lines], decoded
// and filtered.
func (s *Store) List(ctx context.Context, f receipts.Filter) ([]receipts.Receipt, int64, error) {
	f, err := f.Normalize()
	if err != nil {
		return nil, 0, err
	}
	read, next, err := s.readAfter(ctx, f.Tenant, f.After, f.Limit)
	if err != nil {
		return nil, 0, err
	}
	var page []receipts.Receipt
	for _, r := range read {
		if f.Match(r) {
			page = append(page, r)
		}
	}
	return page, next, nil
}

// readAfter decodes one page of [Store.Lines].
func (s *Store) readAfter(ctx context.Context, tenant string, after int64, limit int) ([]receipts.Receipt, int64, error) {
	lines, next, err := s.storedLines(ctx, tenant, after, limit)
	if err != nil {
		return nil, 0, err
	}
	out := make([]receipts.Receipt, 0, len(lines))
	for _, l := range lines {
		r, err := receipts.Decode(l.line)
		if err != nil {
			return nil, 0, fmt.Errorf("redisreceipts: receipt at seq %d of %s: %w", l.seq, tenant, err)
		}
		out = append(out, r)
	}
	return out, next, nil
}

// Lines implements [receipts.Store]: the lines of the log and those
// re-derived from the lowest sealed segment that may hold the seqs after
// the cursor, read in one transaction and merged in seq order (one round
// trip); a page ends with the segment it read, so the next one reads the
// segment after it.
func (s *Store) Lines(ctx context.Context, tenant string, after int64, limit int) ([][]byte, int64, error) {
	stored, next, err := s.storedLines(ctx, tenant, after, limit)
	if err != nil {
		return nil, 0, err
	}
	lines := make([][]byte, len(stored))
	for i, l := range stored {
		lines[i] = l.line
	}
	return lines, next, nil
}

func (s *Store) storedLines(ctx context.Context, tenant string, after int64, limit int) ([]storedLine, int64, error) {
	limit = max(limit, 1)
	_, log := s.chainKeys(tenant)
	var logPage, segPage *redis.ZSliceCmd
	// One transaction (the keys share the tenant's hash tag): a pipeline
	// alone lets a compaction run between its two reads, and a line it
	// moved from the log into a segment would then be read from both.
	_, err := s.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		logPage = p.ZRangeByScoreWithScores(ctx, log, &redis.ZRangeBy{
			Min: "(" + strconv.FormatInt(after, 10), Max: "+inf", Count: int64(limit + 1),
		})
		segPage = p.ZRangeByScoreWithScores(ctx, s.segmentsKey(tenant), &redis.ZRangeBy{
			Min: strconv.FormatInt(after/segmentSize, 10), Max: "+inf", Count: 1,
		})
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("redisreceipts: lines of %s after seq %d: %w", tenant, after, err)
	}
	fromLog := make([]storedLine, 0, len(logPage.Val()))
	for _, m := range logPage.Val() {
		line, _ := m.Member.(string)
		fromLog = append(fromLog, storedLine{seq: int64(m.Score), line: []byte(line)})
	}
	segments := segPage.Val()
	if len(segments) == 0 {
		var next int64
		if len(fromLog) > limit {
			fromLog = fromLog[:limit]
			next = fromLog[limit-1].seq
		}
		return fromLog, next, nil
	}
	number := int64(segments[0].Score)
	blob, _ := segments[0].Member.(string)
	fromSegment, err := decodeSegment(tenant, []byte(blob))
	if err != nil {
		return nil, 0, fmt.Errorf("redisreceipts: segment %d of %s: %w", number, tenant, err)
	}
	// The page ends with the segment: a later one may hold seqs below
	// the log's next lines.
	end := (number + 1) * segmentSize
	for _, l := range fromSegment {
		end = max(end, l.seq)
	}
	out := make([]storedLine, 0, limit)
	i, j := 0, 0
	for len(out) < limit {
		for i < len(fromSegment) && fromSegment[i].seq <= after {
			i++
		}
		switch {
		case i < len(fromSegment) && (j >= len(fromLog) || fromSegment[i].seq <= fromLog[j].seq):
			out = append(out, fromSegment[i])
			i++
		case j < len(fromLog) && fromLog[j].seq <= end:
			out = append(out, fromLog[j])
			j++
		default:
			return out, end, nil
		}
	}
	return out, out[len(out)-1].seq, nil
}

// lastSegment re-derives the lines of tenant's last sealed segment.
func (s *Store) lastSegment(ctx context.Context, tenant string) ([]storedLine, error) {
	zs, err := s.client.ZRevRangeWithScores(ctx, s.segmentsKey(tenant), 0, 0).Result()
	if err != nil {
		return nil, fmt.Errorf("redisreceipts: last segment of %s: %w", tenant, err)
	}
	if len(zs) == 0 {
		return nil, nil
	}
	blob, _ := zs[0].Member.(string)
	lines, err := decodeSegment(tenant, []byte(blob))
	if err != nil {
		return nil, fmt.Errorf("redisreceipts: segment %.0f of %s: %w", zs[0].Score, tenant, err)
	}
	return lines, nil
}
