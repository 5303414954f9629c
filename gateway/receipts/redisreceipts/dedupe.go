package redisreceipts

import (
	"context"
	"fmt"
	"time"

	"github.com/toolgateway/toolgateway/gateway/receipts"
)

// The executed index (<prefix>{receipts:<tenant>}:executed) is what makes
// an execution's executed receipt land once, checked in the append's own
// script. It is kept for dedupeWindow after each append, not for the
// retention: a member costs ~120 bytes of Redis memory, more than a
// compacted receipt, and a duplicate can only come from the outbox (a
// recovery sweep racing the writer, another sweep, or a writer that
// appended and died before clearing), which recovers entries within
// minutes while a gateway runs. A receipt recovered later than that (the
// outbox entry of an execution that completed more than dedupeWindow
// less dedupeScanMargin ago) is first looked for in the chain itself,
// from its completion time on: see dropOldRepeats.
const (
	dedupeWindow = time.Hour
	// dedupeScanMargin: how much earlier than its call's completion an
	// executed receipt may be dated (a clock stepped back), and how long
	// before an index entry leaves the window an old receipt is already
	// looked for in the chain.
	dedupeScanMargin = 10 * time.Minute
)

// Append implements [receipts.Store]: [receipts.Appender.Append] after
// dropOldRepeats.
func (s *Store) Append(ctx context.Context, tenant string, r receipts.Receipt) (receipts.Receipt, error) {
	kept, err := s.dropOldRepeats(ctx, tenant, []receipts.Receipt{r})
	if err != nil {
		return receipts.Receipt{}, err
	}
	if len(kept) == 0 {
		return receipts.Receipt{}, fmt.Errorf("redisreceipts: append for %s: execution %s: %w", tenant, r.ExecutionID, receipts.ErrDuplicate)
	}
	return s.Appender.Append(ctx, tenant, r)
}

// AppendRun implements [receipts.Store]: [receipts.Appender.AppendRun]
// after dropOldRepeats.
func (s *Store) AppendRun(ctx context.Context, tenant string, rs []receipts.Receipt) ([]receipts.Receipt, error) {
	kept, err := s.dropOldRepeats(ctx, tenant, rs)
	if err != nil {
		return nil, err
	}
	return s.Appender.AppendRun(ctx, tenant, kept)
}

// dropOldRepeats leaves out of rs the executed receipts dated before the
// index's window (recovered from the outbox long after their call
// completed) whose execution already has its receipt in tenant's chain,
// looked for from the oldest one's time (less dedupeScanMargin) to the
// chain's end: a writer's receipt is dated when it was sealed, after its
// call completed, and any appended within the window is in the index,
// which the append's script still checks (so two sweeps recovering one
// old entry at once still land it once). Receipts of the window pass as
// they are, without a read.
func (s *Store) dropOldRepeats(ctx context.Context, tenant string, rs []receipts.Receipt) ([]receipts.Receipt, error) {
	horizon := s.clock().Add(-dedupeWindow + dedupeScanMargin)
	var from time.Time
	for _, r := range rs {
		if receipts.DedupeID(r) != "" && !r.Time.IsZero() && r.Time.Before(horizon) && (from.IsZero() || r.Time.Before(from)) {
			from = r.Time
		}
	}
	if from.IsZero() {
		return rs, nil
	}
	found, err := s.executionsSince(ctx, tenant, from.Add(-dedupeScanMargin))
	if err != nil {
		return nil, err
	}
	kept := make([]receipts.Receipt, 0, len(rs))
	for _, r := range rs {
		if id := receipts.DedupeID(r); id == "" || !found[id] {
			kept = append(kept, r)
		}
	}
	return kept, nil
}

// executionsSince are the execution ids of tenant's executed receipts
// dated from on: the first such receipt found by bisecting the chain's
// seqs (a chain's times never go back), then every page after it.
func (s *Store) executionsSince(ctx context.Context, tenant string, from time.Time) (map[string]bool, error) {
	first, _, err := s.readAfter(ctx, tenant, 0, 1)
	if err != nil || len(first) == 0 {
		return nil, err
	}
	last, _, err := s.LastReceipt(ctx, tenant)
	if err != nil {
		return nil, err
	}
	lo, hi := first[0].Seq, last.Seq+1 // the first seq dated from on lies in [lo, hi]
	for lo < hi {
		mid := lo + (hi-lo)/2
		at, _, err := s.readAfter(ctx, tenant, mid-1, 1)
		if err != nil {
			return nil, err
		}
		switch {
		case len(at) == 0:
			hi = mid
		case at[0].Time.Before(from):
			lo = at[0].Seq + 1
		default:
			hi = mid
		}
	}
	found := map[string]bool{}
	for after := lo - 1; ; {
		page, next, err := s.readAfter(ctx, tenant, after, receipts.MaxLimit)
		if err != nil {
			return nil, err
		}
		for _, r := range page {
			if id := receipts.DedupeID(r); id != "" {
				found[id] = true
			}
		}
		if next == 0 {
			return found, nil
		}
		after = next
	}
}
