package pgstore

import (
	"context"
	"fmt"
)

// Sweep deletes expired rows, one bounded batch per statement, until a
// batch comes back short or ctx ends; it returns how many rows it deleted.
// Any number of replicas may sweep at once: each batch skips rows another
// sweeper has locked. Correctness never depends on the sweep (an expired
// row counts as absent everywhere); it only keeps the table small.
func (s *Store) Sweep(ctx context.Context) (int64, error) {
	var total int64
	for {
		n, err := s.sweepBatchOnce(ctx)
		total += n
		if err != nil || n < int64(s.sweepBatch) {
			return total, err
		}
	}
}

// sweepBatchOnce deletes at most one batch of expired rows in one
// statement (its own short transaction).
func (s *Store) sweepBatchOnce(ctx context.Context) (int64, error) {
	if err := s.ready(ctx); err != nil {
		return 0, fmt.Errorf("pgstore: sweep: %w", err)
	}
	tag, err := s.pool.Exec(ctx, s.sql.sweep, s.sweepBatch)
	if err != nil {
		return 0, fmt.Errorf("pgstore: sweep: %w", err)
	}
	return tag.RowsAffected(), nil
}
