package boltstore

import (
	"testing"

	bolt "go.etcd.io/bbolt"
)

// bucketSizes counts the entries of each bucket.
func (s *Store) bucketSizes(t *testing.T) (records, steps, counters int) {
	t.Helper()
	err := s.db.View(func(tx *bolt.Tx) error {
		records = tx.Bucket(recordsBucket).Stats().KeyN
		steps = tx.Bucket(stepsBucket).Stats().KeyN
		counters = tx.Bucket(fencingBucket).Stats().KeyN
		return nil
	})
	if err != nil {
		t.Fatalf("count buckets: %v", err)
	}
	return records, steps, counters
}
