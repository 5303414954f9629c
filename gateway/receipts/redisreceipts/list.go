package redisreceipts

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/receipts"
)

// List implements [receipts.Store]: one ZRANGE of at most Limit+1 members
// after the cursor (the extra one tells whether a next page exists);
// filters apply to the page read.
func (s *Store) List(ctx context.Context, f receipts.Filter) ([]receipts.Receipt, int64, error) {
	f, err := f.Normalize()
	if err != nil {
		return nil, 0, err
	}
	_, log := s.chainKeys(f.Tenant)
	read, err := s.readAfter(ctx, log, f.After, f.Limit+1)
	if err != nil {
		return nil, 0, err
	}
	var next int64
	if len(read) > f.Limit {
		read = read[:f.Limit]
		next = read[f.Limit-1].Seq
	}
	var page []receipts.Receipt
	for _, r := range read {
		if f.Match(r) {
			page = append(page, r)
		}
	}
	return page, next, nil
}

// readAfter decodes up to n receipts of log with seq > after, in seq order.
func (s *Store) readAfter(ctx context.Context, log string, after int64, n int) ([]receipts.Receipt, error) {
	members, err := s.client.ZRangeByScoreWithScores(ctx, log, &redis.ZRangeBy{
		Min: "(" + strconv.FormatInt(after, 10), Max: "+inf", Count: int64(n),
	}).Result()
	if err != nil {
		return nil, fmt.Errorf("redisreceipts: list after seq %d: %w", after, err)
	}
	out := make([]receipts.Receipt, 0, len(members))
	for _, m := range members {
		line, _ := m.Member.(string)
		r, err := receipts.Decode([]byte(line))
		if err != nil {
			return nil, fmt.Errorf("redisreceipts: receipt at seq %.0f: %w", m.Score, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// Lines implements [receipts.Store]: one ZRANGEBYSCORE of at most
// limit+1 members after the cursor.
func (s *Store) Lines(ctx context.Context, tenant string, after int64, limit int) ([][]byte, int64, error) {
	_, log := s.chainKeys(tenant)
	members, err := s.client.ZRangeByScoreWithScores(ctx, log, &redis.ZRangeBy{
		Min: "(" + strconv.FormatInt(after, 10), Max: "+inf", Count: int64(limit + 1),
	}).Result()
	if err != nil {
		return nil, 0, fmt.Errorf("redisreceipts: lines of %s after seq %d: %w", tenant, after, err)
	}
	var next int64
	if len(members) > limit {
		members = members[:limit]
		next = int64(members[limit-1].Score)
	}
	lines := make([][]byte, len(members))
	for i, m := range members {
		line, _ := m.Member.(string)
		lines[i] = []byte(line)
	}
	return lines, next, nil
}
