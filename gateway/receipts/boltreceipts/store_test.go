package boltreceipts

import (
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/toolgateway/toolgateway/gateway/receipts"
	"github.com/toolgateway/toolgateway/gateway/receipts/receiptstest"
)

func TestConformance(t *testing.T) {
	receiptstest.Run(t, func(t *testing.T) receiptstest.Backend {
		db, err := bolt.Open(filepath.Join(t.TempDir(), "gateway.db"), 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		// Two stores over one file: bbolt locks the file per process, so
		// two replicas of the embedded store are two Stores in one process.
		var replicas [2]receipts.Store
		for i := range replicas {
			s, err := New(db, nil)
			if err != nil {
				t.Fatal(err)
			}
			replicas[i] = s
		}
		open := func(t *testing.T) receipts.Store {
			s, err := New(db, nil)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		return receiptstest.Backend{Replicas: replicas, Open: open, Raw: raw{db}}
	})
}

// raw writes a tenant's bucket directly.
type raw struct{ db *bolt.DB }

func (r raw) Put(t *testing.T, tenant string, seq int64, line []byte) {
	r.update(t, tenant, func(b *bolt.Bucket) error { return b.Put(seqKey(seq), line) })
}

func (r raw) Delete(t *testing.T, tenant string, seq int64) {
	r.update(t, tenant, func(b *bolt.Bucket) error { return b.Delete(seqKey(seq)) })
}

func (r raw) update(t *testing.T, tenant string, write func(*bolt.Bucket) error) {
	t.Helper()
	err := r.db.Update(func(tx *bolt.Tx) error { return write(chainBucket(tx, tenant)) })
	if err != nil {
		t.Fatal(err)
	}
}

func (r raw) SetHead(t *testing.T, tenant string, h receipts.Head) {
	r.bucket(t, headsBucket, func(b *bolt.Bucket) error {
		if h == (receipts.Head{}) {
			return b.Delete([]byte(tenant))
		}
		return b.Put([]byte(tenant), append(seqKey(h.Seq), h.Hash...))
	})
}

// Unlist removes the head (if still there): the embedded store lists its
// heads.
func (r raw) Unlist(t *testing.T, tenant string) { r.SetHead(t, tenant, receipts.Head{}) }

func (r raw) PutCheckpoint(t *testing.T, c receipts.Checkpoint) {
	line, err := receipts.EncodeCheckpoint(c)
	if err != nil {
		t.Fatal(err)
	}
	r.bucket(t, checkpointsBucket, func(b *bolt.Bucket) error {
		tenant, err := b.CreateBucketIfNotExists([]byte(c.Tenant))
		if err != nil {
			return err
		}
		return tenant.Put(append(append(seqKey(c.Seq), c.Hash...), c.KeyID...), line)
	})
}

func (r raw) bucket(t *testing.T, name []byte, write func(*bolt.Bucket) error) {
	t.Helper()
	if err := r.db.Update(func(tx *bolt.Tx) error { return write(tx.Bucket(name)) }); err != nil {
		t.Fatal(err)
	}
}
