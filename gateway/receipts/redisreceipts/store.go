// Package redisreceipts keeps receipt chains in Redis (standalone or
// Cluster). Per tenant, three keys under one hash tag, so they share a
// slot, and under the prefix, so whatever removes a prefix's keys removes
// them too:
//
//	<prefix>{receipts:<tenant>}:head  hash {seq, hash}: the chain's head
//	<prefix>{receipts:<tenant>}:log   sorted set: score seq, member the JSON line
//	<prefix>{receipts:<tenant>}:segments  sorted set: score a segment's number,
//	                                      member its compact form (segment.go)
//	<prefix>{receipts:<tenant>}:executed  sorted set: score when appended (ms),
//	                                      member the execution id of an executed
//	                                      receipt, for dedupeWindow (dedupe.go)
//	<prefix>{receipts:<tenant>}:checkpoints  sorted set: score seq, member the
//	                                         checkpoint's JSON line
//
// and two sets: <prefix>receipts:tenants naming the tenants with a chain,
// <prefix>receipts:checkpointed (the checkpoint index) those with a
// checkpoint. An append is
// one script (lua/append.lua): a compare-and-append on the head, sealed in
// Go by [receipts.Appender].
package redisreceipts

import (
	"context"
	"embed"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/receipts"
	"github.com/toolgateway/toolgateway/gateway/redisscript"
)

// luaFiles holds the append script, run by the one runner
// (gateway/redisscript) as every Redis script of the gateway.
//
//go:embed lua/*.lua
var luaFiles embed.FS

var appendScript = redisscript.MustLoad(luaFiles, "append")

// Store is a [receipts.Store] on Redis.
type Store struct {
	*receipts.Appender
	client redis.UniversalClient
	prefix string
	// clock dates the executed index's entries (their append) and its
	// window.
	clock func() time.Time
	// open holds the receipts of the chains' open segments this process
	// sealed, for their compaction.
	open openSegments
}

var _ receipts.Store = (*Store)(nil)

// New returns a store whose keys all start with prefix (the prefix of the
// idempotency store, so one deployment's keys stay together); now is the
// clock of receipts appended without a time (nil: time.Now).
func New(client redis.UniversalClient, prefix string, now func() time.Time) *Store {
	s := &Store{client: client, prefix: prefix, clock: now}
	if now == nil {
		s.clock = time.Now
	}
	s.Appender = receipts.NewAppender(s, now)
	return s
}

// chainKeys are the head and log keys of tenant's chain.
func (s *Store) chainKeys(tenant string) (head, log string) {
	tag := s.chainTag(tenant)
	return tag + ":head", tag + ":log"
}

// executedKey is the index of tenant's executed receipts (dedupe).
func (s *Store) executedKey(tenant string) string { return s.chainTag(tenant) + ":executed" }

func (s *Store) chainTag(tenant string) string { return s.prefix + "{receipts:" + tenant + "}" }

func (s *Store) tenantsKey() string { return s.prefix + "receipts:tenants" }

func (s *Store) checkpointsKey(tenant string) string { return s.chainTag(tenant) + ":checkpoints" }

func (s *Store) checkpointIndexKey() string { return s.prefix + "receipts:checkpointed" }

// CompareAndAppend implements [receipts.Log]: one script call. The first
// receipt of a chain first adds the tenant to the tenants set (another
// slot, so not in the script): a chain never exists unlisted.
func (s *Store) CompareAndAppend(ctx context.Context, tenant string, expected receipts.Head, run []receipts.Sealed) (receipts.Head, error) {
	if expected.Seq == 0 {
		if err := s.client.SAdd(ctx, s.tenantsKey(), tenant).Err(); err != nil {
			return receipts.Head{}, fmt.Errorf("redisreceipts: list tenant: %w", err)
		}
	}
	head, log := s.chainKeys(tenant)
	last := run[len(run)-1].Receipt
	var index []any
	appended := strconv.FormatInt(s.clock().UnixMilli(), 10)
	for _, r := range run {
		if id := receipts.DedupeID(r.Receipt); id != "" {
			index = append(index, appended, id)
		}
	}
	args := make([]any, 0, 4+len(index)+2*len(run))
	args = append(args, strconv.FormatInt(expected.Seq, 10), expected.Hash, last.Hash, len(index)/2)
	args = append(args, index...)
	for _, r := range run {
		args = append(args, strconv.FormatInt(r.Receipt.Seq, 10), r.Line)
	}
	res, err := redisscript.RunOne(ctx, s.client, redisscript.Call{Script: appendScript, Keys: []string{head, log, s.executedKey(tenant)}, Args: args}).Slice()
	if err != nil {
		return receipts.Head{}, fmt.Errorf("redisreceipts: append: %w", err)
	}
	switch ok, _ := res[0].(int64); ok {
	case 1:
		s.compactAfterRun(ctx, tenant, run)
		return receipts.HeadOf(last), nil
	case 2:
		dup := &receipts.DuplicateError{}
		for _, id := range res[1:] {
			text, _ := id.(string)
			dup.ExecutionIDs = append(dup.ExecutionIDs, text)
		}
		return expected, dup
	}
	if len(res) != 4 {
		return receipts.Head{}, fmt.Errorf("redisreceipts: append: unexpected answer %v", res)
	}
	seqText, _ := res[1].(string)
	seq, err := strconv.ParseInt(seqText, 10, 64)
	if err != nil {
		return receipts.Head{}, fmt.Errorf("redisreceipts: head seq %q: %w", seqText, err)
	}
	hash, _ := res[2].(string)
	moved := &receipts.HeadMovedError{}
	if line, _ := res[3].(string); line != "" {
		if r, err := receipts.Decode([]byte(line)); err == nil {
			moved.HeadTime = r.Time
		}
	}
	return receipts.Head{Seq: seq, Hash: hash}, moved
}

// Tenants implements [receipts.Store].
func (s *Store) Tenants(ctx context.Context) ([]string, error) {
	tenants, err := s.client.SMembers(ctx, s.tenantsKey()).Result()
	if err != nil {
		return nil, fmt.Errorf("redisreceipts: tenants: %w", err)
	}
	slices.Sort(tenants)
	return tenants, nil
}

// PutCheckpoint implements [receipts.CheckpointStore]: the tenant is
// named in the checkpoint index and listed again (a listing removed by
// hand comes back), then the checkpoint joins its chain's slot.
func (s *Store) PutCheckpoint(ctx context.Context, c receipts.Checkpoint) error {
	line, err := receipts.EncodeCheckpoint(c)
	if err != nil {
		return err
	}
	for _, key := range []string{s.checkpointIndexKey(), s.tenantsKey()} {
		if err := s.client.SAdd(ctx, key, c.Tenant).Err(); err != nil {
			return fmt.Errorf("redisreceipts: put checkpoint of %s: %w", c.Tenant, err)
		}
	}
	z := redis.Z{Score: float64(c.Seq), Member: string(line)}
	if err := s.client.ZAdd(ctx, s.checkpointsKey(c.Tenant), z).Err(); err != nil {
		return fmt.Errorf("redisreceipts: put checkpoint of %s: %w", c.Tenant, err)
	}
	return nil
}

// Checkpoints implements [receipts.CheckpointStore].
func (s *Store) Checkpoints(ctx context.Context, tenant string) ([]receipts.Checkpoint, error) {
	lines, err := s.client.ZRange(ctx, s.checkpointsKey(tenant), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("redisreceipts: checkpoints of %s: %w", tenant, err)
	}
	out, err := receipts.DecodeCheckpoints(lines)
	if err != nil {
		return nil, fmt.Errorf("redisreceipts: checkpoints of %s: %w", tenant, err)
	}
	return out, nil
}

// latestBatch bounds the checkpoints LatestCheckpoints reads: those of
// one seq (one per key and hash) and a few more.
const latestBatch = 16

// LatestCheckpoints implements [receipts.CheckpointStore]: one
// ZREVRANGEBYSCORE of the highest few.
func (s *Store) LatestCheckpoints(ctx context.Context, tenant string) ([]receipts.Checkpoint, error) {
	zs, err := s.client.ZRevRangeByScoreWithScores(ctx, s.checkpointsKey(tenant), &redis.ZRangeBy{
		Min: "-inf", Max: "+inf", Count: latestBatch,
	}).Result()
	if err != nil {
		return nil, fmt.Errorf("redisreceipts: latest checkpoints of %s: %w", tenant, err)
	}
	var out []receipts.Checkpoint
	for _, z := range zs {
		if z.Score != zs[0].Score {
			break
		}
		line, _ := z.Member.(string)
		c, err := receipts.DecodeCheckpoint([]byte(line))
		if err != nil {
			return nil, fmt.Errorf("redisreceipts: latest checkpoints of %s: %w", tenant, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// CheckpointTenants implements [receipts.CheckpointStore].
func (s *Store) CheckpointTenants(ctx context.Context) ([]string, error) {
	tenants, err := s.client.SMembers(ctx, s.checkpointIndexKey()).Result()
	if err != nil {
		return nil, fmt.Errorf("redisreceipts: checkpoint index: %w", err)
	}
	slices.Sort(tenants)
	return tenants, nil
}

// LastReceipt implements [receipts.CheckpointStore]: the log's last line
// (compaction always leaves it), or, for a log emptied by hand, the last
// segment's last receipt.
func (s *Store) LastReceipt(ctx context.Context, tenant string) (receipts.Receipt, bool, error) {
	_, log := s.chainKeys(tenant)
	lines, err := s.client.ZRevRange(ctx, log, 0, 0).Result()
	if err != nil {
		return receipts.Receipt{}, false, fmt.Errorf("redisreceipts: last receipt of %s: %w", tenant, err)
	}
	if len(lines) == 0 {
		segment, err := s.lastSegment(ctx, tenant)
		if err != nil || len(segment) == 0 {
			return receipts.Receipt{}, false, err
		}
		lines = []string{string(segment[len(segment)-1].line)}
	}
	r, err := receipts.Decode([]byte(lines[0]))
	if err != nil {
		return receipts.Receipt{}, false, fmt.Errorf("redisreceipts: last receipt of %s: %w", tenant, err)
	}
	return r, true, nil
}
