// Package boltreceipts keeps receipt chains in a bbolt file: the embedded
// store's file, so a gateway holds one file lock. Two top-level buckets:
//
//	receipt_heads   tenant -> seq (8 bytes, big-endian) + hash
//	receipts        one bucket per tenant: seq (8 bytes, big-endian) -> JSON line
//	receipt_executions  one bucket per tenant: execution id of an executed
//	                    receipt -> its time (Unix ns, 8 bytes, big-endian)
//	receipt_checkpoints one bucket per tenant (the checkpoint index):
//	                    seq (8 bytes, big-endian) + hash + key id -> JSON line
//
// An append is one Update transaction: a compare-and-append on the head,
// sealed in Go by [receipts.Appender] like every store.
package boltreceipts

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/toolgateway/toolgateway/gateway/receipts"
)

var (
	headsBucket       = []byte("receipt_heads")
	chainsBucket      = []byte("receipts")
	executionsBucket  = []byte("receipt_executions")
	checkpointsBucket = []byte("receipt_checkpoints")
)

// Store is a [receipts.Store] in a bbolt file.
type Store struct {
	*receipts.Appender
	db *bolt.DB
}

var _ receipts.Store = (*Store)(nil)

// New returns a store in db, creating its buckets; now is the clock of
// receipts appended without a time (nil: time.Now).
func New(db *bolt.DB, now func() time.Time) (*Store, error) {
	err := db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{headsBucket, chainsBucket, executionsBucket, checkpointsBucket} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("boltreceipts: create buckets: %w", err)
	}
	s := &Store{db: db}
	s.Appender = receipts.NewAppender(s, now)
	return s, nil
}

// seqKey is the key of seq in a tenant's bucket: big-endian, so bbolt's
// byte order is seq order.
func seqKey(seq int64) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(seq))
}

// chainBucket is tenant's bucket of receipts in tx (nil if none).
func chainBucket(tx *bolt.Tx, tenant string) *bolt.Bucket {
	return tx.Bucket(chainsBucket).Bucket([]byte(tenant))
}

func decodeHead(v []byte) receipts.Head {
	if len(v) < 8 {
		return receipts.Head{}
	}
	return receipts.Head{Seq: int64(binary.BigEndian.Uint64(v)), Hash: string(v[8:])}
}

// headIn is tenant's head in tx: its head key, or, when that was removed
// while receipts remain, the last receipt's, so a chain whose head was
// deleted by hand continues instead of being overwritten from seq 1.
func headIn(tx *bolt.Tx, tenant string) receipts.Head {
	if v := tx.Bucket(headsBucket).Get([]byte(tenant)); v != nil {
		return decodeHead(v)
	}
	if r, ok := lastIn(tx, tenant); ok {
		return receipts.HeadOf(r)
	}
	return receipts.Head{}
}

// lastIn is tenant's last receipt in tx (false: none, or undecodable).
func lastIn(tx *bolt.Tx, tenant string) (receipts.Receipt, bool) {
	chain := chainBucket(tx, tenant)
	if chain == nil {
		return receipts.Receipt{}, false
	}
	_, v := chain.Cursor().Last()
	if v == nil {
		return receipts.Receipt{}, false
	}
	r, err := receipts.Decode(v)
	return r, err == nil
}

// CompareAndAppend implements [receipts.Log]: one Update transaction.
func (s *Store) CompareAndAppend(ctx context.Context, tenant string, expected receipts.Head, run []receipts.Sealed) (receipts.Head, error) {
	if err := ctx.Err(); err != nil { // a bbolt commit cannot be cancelled
		return receipts.Head{}, err
	}
	var current receipts.Head
	moved := false
	var movedTime time.Time
	var dup *receipts.DuplicateError
	err := s.db.Update(func(tx *bolt.Tx) error {
		heads := tx.Bucket(headsBucket)
		current = headIn(tx, tenant)
		if current != expected {
			moved = true
			if r, ok := lastIn(tx, tenant); ok && r.Seq == current.Seq {
				movedTime = r.Time
			}
			return nil
		}
		var err error
		if dup, err = indexExecutions(tx, tenant, run); err != nil || dup != nil {
			return err
		}
		chain, err := tx.Bucket(chainsBucket).CreateBucketIfNotExists([]byte(tenant))
		if err != nil {
			return err
		}
		for _, r := range run {
			if err := chain.Put(seqKey(r.Receipt.Seq), r.Line); err != nil {
				return err
			}
		}
		last := run[len(run)-1].Receipt
		return heads.Put([]byte(tenant), append(seqKey(last.Seq), last.Hash...))
	})
	switch {
	case err != nil:
		return receipts.Head{}, fmt.Errorf("boltreceipts: append: %w", err)
	case moved:
		return current, &receipts.HeadMovedError{HeadTime: movedTime}
	case dup != nil:
		return current, dup
	}
	return receipts.HeadOf(run[len(run)-1].Receipt), nil
}

// indexExecutions adds the run's executions to tenant's index in tx, or
// names those already there (and adds nothing).
func indexExecutions(tx *bolt.Tx, tenant string, run []receipts.Sealed) (*receipts.DuplicateError, error) {
	index, err := tx.Bucket(executionsBucket).CreateBucketIfNotExists([]byte(tenant))
	if err != nil {
		return nil, err
	}
	var dup []string
	for _, r := range run {
		if id := receipts.DedupeID(r.Receipt); id != "" && index.Get([]byte(id)) != nil {
			dup = append(dup, id)
		}
	}
	if dup != nil {
		return &receipts.DuplicateError{ExecutionIDs: dup}, nil
	}
	for _, r := range run {
		if id := receipts.DedupeID(r.Receipt); id != "" {
			if err := index.Put([]byte(id), seqKey(r.Receipt.Time.UnixNano())); err != nil {
				return nil, err
			}
		}
	}
	return nil, nil
}

// Tenants implements [receipts.Store]: the tenants with a head, and those
// with receipts whose head was removed.
func (s *Store) Tenants(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var tenants []string
	err := s.db.View(func(tx *bolt.Tx) error {
		err := tx.Bucket(headsBucket).ForEach(func(k, _ []byte) error {
			tenants = append(tenants, string(k))
			return nil
		})
		if err != nil {
			return err
		}
		return tx.Bucket(chainsBucket).ForEachBucket(func(k []byte) error {
			tenants = append(tenants, string(k))
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("boltreceipts: tenants: %w", err)
	}
	return slices.Compact(slices.Sorted(slices.Values(tenants))), nil
}

// PutCheckpoint implements [receipts.CheckpointStore].
func (s *Store) PutCheckpoint(ctx context.Context, c receipts.Checkpoint) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	line, err := receipts.EncodeCheckpoint(c)
	if err != nil {
		return err
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.Bucket(checkpointsBucket).CreateBucketIfNotExists([]byte(c.Tenant))
		if err != nil {
			return err
		}
		return b.Put(append(append(seqKey(c.Seq), c.Hash...), c.KeyID...), line)
	})
	if err != nil {
		return fmt.Errorf("boltreceipts: put checkpoint of %s: %w", c.Tenant, err)
	}
	return nil
}

// Checkpoints implements [receipts.CheckpointStore].
func (s *Store) Checkpoints(ctx context.Context, tenant string) ([]receipts.Checkpoint, error) {
	return s.checkpointsOf(ctx, tenant, "checkpoints", func(b *bolt.Bucket, add func(v []byte) error) error {
		return b.ForEach(func(_, v []byte) error { return add(v) })
	})
}

// LatestCheckpoints implements [receipts.CheckpointStore]: a walk back
// from the last key.
func (s *Store) LatestCheckpoints(ctx context.Context, tenant string) ([]receipts.Checkpoint, error) {
	return s.checkpointsOf(ctx, tenant, "latest checkpoints", func(b *bolt.Bucket, add func(v []byte) error) error {
		c := b.Cursor()
		k, v := c.Last()
		for top := k; k != nil && bytes.Equal(k[:8], top[:8]); k, v = c.Prev() {
			if err := add(v); err != nil {
				return err
			}
		}
		return nil
	})
}

// checkpointsOf reads the checkpoints walk hands to add from tenant's
// bucket (none without one), in walk's order; what names the read in
// the error.
func (s *Store) checkpointsOf(ctx context.Context, tenant, what string, walk func(b *bolt.Bucket, add func(v []byte) error) error) ([]receipts.Checkpoint, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []receipts.Checkpoint
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(checkpointsBucket).Bucket([]byte(tenant))
		if b == nil {
			return nil
		}
		return walk(b, func(v []byte) error {
			c, err := receipts.DecodeCheckpoint(v)
			if err != nil {
				return err
			}
			out = append(out, c)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("boltreceipts: %s of %s: %w", what, tenant, err)
	}
	return out, nil
}

// CheckpointTenants implements [receipts.CheckpointStore].
func (s *Store) CheckpointTenants(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var tenants []string
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(checkpointsBucket).ForEachBucket(func(k []byte) error {
			tenants = append(tenants, string(k))
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("boltreceipts: checkpoint index: %w", err)
	}
	return tenants, nil
}

// LastReceipt implements [receipts.CheckpointStore].
func (s *Store) LastReceipt(ctx context.Context, tenant string) (receipts.Receipt, bool, error) {
	if err := ctx.Err(); err != nil {
		return receipts.Receipt{}, false, err
	}
	var r receipts.Receipt
	var ok bool
	err := s.db.View(func(tx *bolt.Tx) error {
		chain := chainBucket(tx, tenant)
		if chain == nil {
			return nil
		}
		_, v := chain.Cursor().Last()
		if v == nil {
			return nil
		}
		var err error
		r, err = receipts.Decode(v)
		ok = err == nil
		return err
	})
	if err != nil {
		return receipts.Receipt{}, false, fmt.Errorf("boltreceipts: last receipt of %s: %w", tenant, err)
	}
	return r, ok, nil
}

// List implements [receipts.Store]: one read transaction over at most
// Limit+1 receipts after the cursor.
func (s *Store) List(ctx context.Context, f receipts.Filter) ([]receipts.Receipt, int64, error) {
	f, err := f.Normalize()
	if err != nil {
		return nil, 0, err
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	var page []receipts.Receipt
	var next int64
	err = s.db.View(func(tx *bolt.Tx) error {
		chain := chainBucket(tx, f.Tenant)
		if chain == nil {
			return nil
		}
		c := chain.Cursor()
		read, last := 0, int64(0)
		for k, v := c.Seek(seqKey(f.After + 1)); k != nil; k, v = c.Next() {
			if read == f.Limit {
				next = last // there is more after the page
				return nil
			}
			read, last = read+1, int64(binary.BigEndian.Uint64(k))
			r, err := receipts.Decode(v)
			if err != nil {
				return fmt.Errorf("seq %d: %w", binary.BigEndian.Uint64(k), err)
			}
			if f.Match(r) {
				page = append(page, r)
			}
		}
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("boltreceipts: list %s: %w", f.Tenant, err)
	}
	return page, next, nil
}

// Lines implements [receipts.Store].
func (s *Store) Lines(ctx context.Context, tenant string, after int64, limit int) ([][]byte, int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	var lines [][]byte
	var next int64
	err := s.db.View(func(tx *bolt.Tx) error {
		chain := chainBucket(tx, tenant)
		if chain == nil {
			return nil
		}
		c := chain.Cursor()
		last := int64(0)
		for k, v := c.Seek(seqKey(after + 1)); k != nil; k, v = c.Next() {
			if len(lines) == limit {
				next = last
				return nil
			}
			lines, last = append(lines, bytes.Clone(v)), int64(binary.BigEndian.Uint64(k))
		}
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("boltreceipts: lines of %s: %w", tenant, err)
	}
	return lines, next, nil
}

// Expire implements [receipts.Store]: in one Update transaction, per
// tenant, the longest run of oldest receipts sealed before before, so what
// stays is a contiguous chain even when writers' clocks disagree.
func (s *Store) Expire(ctx context.Context, before time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	removed := 0
	err := s.db.Update(func(tx *bolt.Tx) error {
		if err := expireExecutions(tx, before); err != nil {
			return err
		}
		return tx.Bucket(chainsBucket).ForEachBucket(func(tenant []byte) error {
			c := tx.Bucket(chainsBucket).Bucket(tenant).Cursor()
			lastExpired := int64(0)
			for k, v := c.First(); k != nil; k, v = c.First() {
				r, err := receipts.Decode(v)
				if err != nil {
					return fmt.Errorf("%s seq %d: %w", bytes.Clone(tenant), binary.BigEndian.Uint64(k), err)
				}
				if !r.Time.Before(before) {
					break
				}
				if err := c.Delete(); err != nil {
					return err
				}
				removed, lastExpired = removed+1, r.Seq
			}
			return expireCheckpoints(tx, tenant, lastExpired)
		})
	})
	if err != nil {
		return 0, fmt.Errorf("boltreceipts: expire: %w", err)
	}
	return removed, nil
}

// expireCheckpoints drops tenant's checkpoints of seqs below
// lastExpired, the last receipt expiry removed (0: none): its own
// checkpoint vouches for the kept chain's anchor.
func expireCheckpoints(tx *bolt.Tx, tenant []byte, lastExpired int64) error {
	b := tx.Bucket(checkpointsBucket).Bucket(tenant)
	if b == nil || lastExpired == 0 {
		return nil
	}
	c := b.Cursor()
	for k, _ := c.First(); k != nil && int64(binary.BigEndian.Uint64(k[:8])) < lastExpired; k, _ = c.First() {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

// expireExecutions drops the dedupe index's entries older than before:
// it is kept as long as the receipts.
func expireExecutions(tx *bolt.Tx, before time.Time) error {
	return tx.Bucket(executionsBucket).ForEachBucket(func(tenant []byte) error {
		index := tx.Bucket(executionsBucket).Bucket(tenant)
		var old [][]byte
		err := index.ForEach(func(k, v []byte) error {
			if len(v) == 8 && int64(binary.BigEndian.Uint64(v)) < before.UnixNano() {
				old = append(old, bytes.Clone(k))
			}
			return nil
		})
		for _, k := range old {
			if err == nil {
				err = index.Delete(k)
			}
		}
		return err
	})
}
