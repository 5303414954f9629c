package redisreceipts

import (
	"context"
	"crypto/sha1" //nolint:gosec // compact.lua compares with redis.sha1hex: a check of what was read, not a security boundary
	_ "embed"     // the compaction script lives in lua/compact.lua
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/receipts"
)

var (
	//go:embed lua/compact.lua
	compactLua    string
	compactScript = redis.NewScript(compactLua)
)

// segmentsKey is the sorted set of tenant's sealed segments.
func (s *Store) segmentsKey(tenant string) string { return s.chainTag(tenant) + ":segments" }

// compactAfterRun compacts the segments the appended run completed:
// those whose last seq is now below the head. It runs on the writer's
// goroutine, off the call path, once per segmentSize receipts of a chain;
// a segment it fails to compact stays as lines, which read the same,
// until the hourly expiry compacts it. A segment whose receipts this
// process sealed, every one, is compacted from them (openSegments);
// another is read back from Redis.
func (s *Store) compactAfterRun(ctx context.Context, tenant string, run []receipts.Sealed) {
	first, last := run[0].Receipt.Seq, run[len(run)-1].Receipt.Seq
	cached := s.open.add(tenant, run)
	// Segment m-1 ends at seq m*segmentSize: completed when the run
	// moved the head from first-1 past it.
	for m := (first - 1 + segmentSize - 1) / segmentSize; m*segmentSize <= last-1; m++ {
		if m < 1 {
			continue
		}
		lo := (m-1)*segmentSize + 1
		if len(cached) > 0 && cached[0].Receipt.Seq <= lo && cached[len(cached)-1].Receipt.Seq >= lo+segmentSize-1 {
			from := lo - cached[0].Receipt.Seq
			_, _ = s.compactSealed(ctx, tenant, m-1, cached[from:from+segmentSize])
			continue
		}
		_, _ = s.compact(ctx, tenant, m-1)
	}
}

// openSegments keeps, per tenant, the receipts this process sealed since
// the start of the chain's open segment, so the segment's compaction
// need not read them back and decode their JSON. A gap (another replica
// appended) starts over; at most maxOpenTenants chains are kept, others
// are read back.
type openSegments struct {
	mu     sync.Mutex
	chains map[string][]receipts.Sealed
}

// maxOpenTenants bounds what openSegments holds: a chain's open segment
// is up to segmentSize receipts of ~1 KB (the receipt and its line).
const maxOpenTenants = 64

// add records run, just appended to tenant's chain, and answers the
// receipts kept of the chain before dropping those of the segments run
// completed (nil when the chain is not kept).
func (o *openSegments) add(tenant string, run []receipts.Sealed) []receipts.Sealed {
	o.mu.Lock()
	defer o.mu.Unlock()
	kept, ok := o.chains[tenant]
	if !ok && len(o.chains) >= maxOpenTenants {
		return nil
	}
	if o.chains == nil {
		o.chains = make(map[string][]receipts.Sealed)
	}
	if n := len(kept); n > 0 && kept[n-1].Receipt.Seq+1 != run[0].Receipt.Seq {
		kept = nil
	}
	kept = append(kept, run...)
	// The open segment is the one the head is in; what comes before it
	// is compacted now or read back later.
	openFrom := (kept[len(kept)-1].Receipt.Seq-1)/segmentSize*segmentSize + 1
	i := 0
	for i < len(kept) && kept[i].Receipt.Seq < openFrom {
		i++
	}
	// Copied only when a segment is dropped (once per segmentSize
	// receipts), so its receipts can be freed; appends after kept's end
	// leave the receipts answered untouched.
	if i > 0 {
		o.chains[tenant] = slices.Clone(kept[i:])
	} else {
		o.chains[tenant] = kept
	}
	return kept
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
	return s.replaceLines(ctx, tenant, n, linesDigest(lines), blob)
}

// compactSealed is compact for segment n's receipts as this process
// sealed them: compact.lua replaces the stored lines only if they are
// these.
func (s *Store) compactSealed(ctx context.Context, tenant string, n int64, seg []receipts.Sealed) (ok bool, err error) {
	blob, ok, err := encodeSealed(tenant, seg)
	if !ok || err != nil {
		return false, wrapCompact(tenant, err)
	}
	lines := make([][]byte, len(seg))
	for i, sealed := range seg {
		lines[i] = sealed.Line
	}
	return s.replaceLines(ctx, tenant, n, linesDigest(lines), blob)
}

// linesDigest is what compact.lua compares the stored lines with: the
// SHA-1 (hex) of lines joined by newlines.
func linesDigest[L ~string | ~[]byte](lines []L) string {
	h := sha1.New() //nolint:gosec // see the import
	for i, line := range lines {
		if i > 0 {
			h.Write([]byte("\n"))
		}
		h.Write([]byte(line))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// replaceLines replaces segment n's stored lines, whose linesDigest is
// digest, by blob.
func (s *Store) replaceLines(ctx context.Context, tenant string, n int64, digest string, blob []byte) (bool, error) {
	_, log := s.chainKeys(tenant)
	lo, hi := n*segmentSize+1, (n+1)*segmentSize
	done, err := compactScript.Run(ctx, s.client, []string{log, s.segmentsKey(tenant)},
		lo, hi, digest, n, blob).Int()
	if err != nil {
		return false, wrapCompact(tenant, err)
	}
	return done == 1, nil
}
