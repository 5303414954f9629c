package boltstore

import (
	"context"
	"fmt"
	"log/slog"

	bolt "go.etcd.io/bbolt"
)

// sweepBatch bounds how many entries one sweeping write transaction
// deletes, so claims are not held up behind a long sweep.
const sweepBatch = 1000

// sweepInBackground is the background sweeper's sweep.
func (s *Store) sweepInBackground(ctx context.Context) {
	if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
		// Expired records are already invisible to readers; a failed
		// sweep only delays reclaiming their space.
		slog.Warn("boltstore: sweep failed", "error", err)
	}
}

// Sweep deletes expired records with their step entries, step entries whose
// record is gone, and fencing counters the clock has overtaken. It returns
// the number of records deleted. The background sweeper calls it; it is
// exported for tests and tools.
func (s *Store) Sweep(ctx context.Context) (int, error) {
	var candidates sweepCandidates
	err := s.db.View(func(tx *bolt.Tx) error {
		t, err := newTxn(tx, s.now())
		if err != nil {
			return err
		}
		candidates, err = t.findGarbage()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("boltstore: sweep scan: %w", err)
	}

	// The scan was a read; each deletion is re-checked in the write
	// transaction, since a record may have been claimed again meanwhile.
	removed := 0
	for _, batch := range candidates.batches() {
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		err := s.update(ctx, func(tx *bolt.Tx) error {
			t, err := newTxn(tx, s.now())
			if err != nil {
				return err
			}
			n, err := t.removeGarbage(batch)
			removed += n
			return err
		})
		if err != nil {
			return removed, fmt.Errorf("boltstore: sweep: %w", err)
		}
	}
	err = s.update(ctx, func(tx *bolt.Tx) error {
		t, err := newTxn(tx, s.now())
		if err != nil {
			return err
		}
		return t.dropPastBudgets()
	})
	if err != nil {
		return removed, fmt.Errorf("boltstore: sweep budgets: %w", err)
	}
	return removed, nil
}

// garbageKind says which bucket a sweep candidate is in.
type garbageKind int

const (
	garbageRecord garbageKind = iota
	garbageStep
	garbageFencing
)

type garbage struct {
	kind garbageKind
	key  []byte
}

type sweepCandidates []garbage

func (c sweepCandidates) batches() [][]garbage {
	var out [][]garbage
	for len(c) > 0 {
		n := min(len(c), sweepBatch)
		out = append(out, c[:n])
		c = c[n:]
	}
	return out
}

// findGarbage lists the keys that look removable. Keys are copied: bbolt's
// slices are only valid inside the transaction.
func (t *txn) findGarbage() (sweepCandidates, error) {
	var out sweepCandidates
	err := t.records.ForEach(func(k, v []byte) error {
		r, err := decodeRecord(v)
		if err != nil {
			return err
		}
		if r.expired(t.now) {
			out = append(out, garbage{garbageRecord, clone(k)})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = t.steps.ForEach(func(k, v []byte) error {
		out = append(out, garbage{garbageStep, clone(k)})
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = t.fencing.ForEach(func(k, v []byte) error {
		if t.fencingCounterObsolete(v) {
			out = append(out, garbage{garbageFencing, clone(k)})
		}
		return nil
	})
	return out, err
}

// removeGarbage deletes each candidate that is still garbage now.
func (t *txn) removeGarbage(batch []garbage) (removedRecords int, err error) {
	for _, g := range batch {
		switch g.kind {
		case garbageRecord:
			value := t.records.Get(g.key)
			if value == nil {
				continue
			}
			r, err := decodeRecord(value)
			if err != nil {
				return removedRecords, err
			}
			if !r.expired(t.now) {
				continue
			}
			if err := t.deleteRecord(g.key, r); err != nil {
				return removedRecords, err
			}
			removedRecords++
		case garbageStep:
			orphan, err := t.stepOrphaned(g.key)
			if err != nil {
				return removedRecords, err
			}
			if orphan {
				if err := t.steps.Delete(g.key); err != nil {
					return removedRecords, fmt.Errorf("delete step entry: %w", err)
				}
			}
		case garbageFencing:
			if value := t.fencing.Get(g.key); value != nil && t.fencingCounterObsolete(value) {
				if err := t.fencing.Delete(g.key); err != nil {
					return removedRecords, fmt.Errorf("delete fencing counter: %w", err)
				}
			}
		}
	}
	return removedRecords, nil
}

// stepOrphaned reports whether the step entry under key no longer points at
// a live record holding that step.
func (t *txn) stepOrphaned(key []byte) (bool, error) {
	holderKey := t.steps.Get(key)
	if holderKey == nil {
		return false, nil
	}
	holder, err := t.liveRecord(holderKey)
	if err != nil {
		return false, err
	}
	if holder == nil || holder.Step == nil {
		return true, nil
	}
	return string(stepKey(holder.Tenant, stepOf(holder.Step))) != string(key), nil
}

// fencingCounterObsolete reports whether the clock has passed the counter:
// nextFencingToken never hands out less than the current microsecond, so
// every later token is larger without it.
func (t *txn) fencingCounterObsolete(value []byte) bool {
	return decodeToken(value) < t.now.UnixMicro()
}

func clone(b []byte) []byte {
	return append([]byte(nil), b...)
}
