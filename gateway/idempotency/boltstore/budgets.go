package boltstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	bolt "go.etcd.io/bbolt"
)

// KeepsBudgets reports that Claim honours idempotency.ClaimRequest.Charges.
func (s *Store) KeepsBudgets() bool { return true }

var _ idempotency.BudgetKeeper = (*Store)(nil)

// storedBudget is one budget bucket: its reservations by the scope key of
// the record holding each, and when the bucket may be dropped.
type storedBudget struct {
	Entries map[string]budgetEntry `json:"e"`
	// Until is when the bucket may be dropped (Unix nanoseconds).
	Until int64 `json:"u"`
}

// budgetEntry is one record's reservation.
type budgetEntry struct {
	Cost int64 `json:"c"`
	At   int64 `json:"t"` // Unix nanoseconds
}

func (t *txn) budget(bucket string) (*storedBudget, error) {
	b := &storedBudget{Entries: map[string]budgetEntry{}}
	raw := t.budgets.Get([]byte(bucket))
	if raw == nil {
		return b, nil
	}
	if err := json.Unmarshal(raw, b); err != nil {
		return nil, fmt.Errorf("decode budget bucket: %w", err)
	}
	if b.Entries == nil {
		b.Entries = map[string]budgetEntry{}
	}
	return b, nil
}

func (t *txn) putBudget(bucket string, b *storedBudget) error {
	raw, err := json.Marshal(b)
	if err != nil {
		return fmt.Errorf("encode budget bucket: %w", err)
	}
	if err := t.budgets.Put([]byte(bucket), raw); err != nil {
		return fmt.Errorf("put budget bucket: %w", err)
	}
	return nil
}

// sum is what counts against the limit: the entries at or after since.
func (b *storedBudget) sum(since time.Time) int64 {
	var total int64
	for _, e := range b.Entries {
		if e.At >= since.UnixNano() {
			total += e.Cost
		}
	}
	return total
}

// reserve takes req's charges for the record r under key, all or none, in
// the claim's transaction. With check set, a charge that would take its
// bucket over the limit refuses them all (over names it) and writes
// nothing; without, the charges are taken whatever the sums (an approved
// call). A bucket that already holds the record's entry is not charged
// again. The caller writes r afterwards (it carries the buckets).
func (t *txn) reserve(key []byte, r *storedRecord, req idempotency.ClaimRequest, check bool) (*idempotency.BudgetExceeded, error) {
	buckets := make([]*storedBudget, len(req.Charges))
	for i, c := range req.Charges {
		b, err := t.budget(c.Bucket)
		if err != nil {
			return nil, err
		}
		buckets[i] = b
		if _, held := b.Entries[string(key)]; held {
			continue
		}
		if left := c.Limit - b.sum(c.Since); check && c.Cost > left {
			return &idempotency.BudgetExceeded{Budget: c.Budget, Remaining: left}, nil
		}
	}
	for i, c := range req.Charges {
		b := buckets[i]
		if _, held := b.Entries[string(key)]; held {
			continue
		}
		// Entries of windows long past are dropped as the bucket is written.
		for k, e := range b.Entries {
			if e.At < c.Since.Add(-c.Retain).UnixNano() {
				delete(b.Entries, k)
			}
		}
		b.Entries[string(key)] = budgetEntry{Cost: c.Cost, At: c.At.UnixNano()}
		b.Until = max(b.Until, c.At.Add(c.Retain).UnixNano())
		if err := t.putBudget(c.Bucket, b); err != nil {
			return nil, err
		}
		if !slices.Contains(r.Charges, c.Bucket) {
			r.Charges = append(r.Charges, c.Bucket)
		}
	}
	return nil, nil
}

// releaseCharges drops the reservations of the record under key: its
// call did not act (released by its owner, dropped by reconciliation) or
// an operator deleted it.
func (t *txn) releaseCharges(key []byte, r *storedRecord) error {
	for _, bucket := range r.Charges {
		b, err := t.budget(bucket)
		if err != nil {
			return err
		}
		if _, held := b.Entries[string(key)]; !held {
			continue
		}
		delete(b.Entries, string(key))
		if len(b.Entries) == 0 {
			if err := t.budgets.Delete([]byte(bucket)); err != nil {
				return fmt.Errorf("delete budget bucket: %w", err)
			}
			continue
		}
		if err := t.putBudget(bucket, b); err != nil {
			return err
		}
	}
	return nil
}

// BudgetUsage reads the bucket in a snapshot: an entry whose record is
// live and COMPLETED is used, any other is held (an expired record's
// entry is held too: it cannot tell a completed call from an uncertain
// one any more, so it reports the larger share as open).
func (s *Store) BudgetUsage(ctx context.Context, bucket string, since time.Time, rolling bool) (idempotency.BudgetUsage, error) {
	var u idempotency.BudgetUsage
	if err := ctx.Err(); err != nil {
		return u, err
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		t, err := newTxn(tx, s.now())
		if err != nil {
			return err
		}
		b, err := t.budget(bucket)
		if err != nil {
			return err
		}
		for key, e := range b.Entries {
			if rolling && e.At < since.UnixNano() {
				continue
			}
			u.Reserved += e.Cost
			r, err := t.liveRecord([]byte(key))
			if err != nil {
				return err
			}
			if r == nil || idempotency.State(r.State) != idempotency.StateCompleted {
				u.Held += e.Cost
			}
		}
		return nil
	})
	if err != nil {
		return idempotency.BudgetUsage{}, fmt.Errorf("boltstore: budget usage: %w", err)
	}
	return u, nil
}

// dropPastBudgets deletes the budget buckets past their retention (a
// calendar window that ended more than a day ago): nothing counts them
// any more.
func (t *txn) dropPastBudgets() error {
	var past [][]byte
	err := t.budgets.ForEach(func(k, v []byte) error {
		var b storedBudget
		if err := json.Unmarshal(v, &b); err != nil {
			return fmt.Errorf("decode budget bucket: %w", err)
		}
		if b.Until < t.now.UnixNano() {
			past = append(past, clone(k))
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range past {
		if err := t.budgets.Delete(k); err != nil {
			return fmt.Errorf("delete budget bucket: %w", err)
		}
	}
	return nil
}

// Reservations reads the live record under scope and, in the same
// snapshot, its entry in each bucket it charged.
func (s *Store) Reservations(ctx context.Context, scope idempotency.Scope) ([]idempotency.Reservation, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []idempotency.Reservation
	err := s.db.View(func(tx *bolt.Tx) error {
		t, err := newTxn(tx, s.now())
		if err != nil {
			return err
		}
		key := scopeKey(scope)
		r, err := t.liveRecord(key)
		if err != nil {
			return err
		}
		if r == nil {
			return idempotency.ErrNotFound
		}
		for _, bucket := range r.Charges {
			b, err := t.budget(bucket)
			if err != nil {
				return err
			}
			if e, held := b.Entries[string(key)]; held {
				out = append(out, idempotency.Reservation{Budget: idempotency.BudgetOfBucket(bucket), Cost: e.Cost})
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("boltstore: reservations: %w", err)
	}
	return out, nil
}
