package boltstore

import (
	"fmt"
	"strconv"

	bolt "go.etcd.io/bbolt"
)

// MarkNewerLayout writes, into the closed store file at path, a layout
// version one above the newest this gateway knows, as a newer gateway
// would have: what `gateway verify` opens to prove that this build then
// runs nothing. Never use it on a store that serves.
func MarkNewerLayout(path string) error {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: openLockTimeout})
	if err != nil {
		return fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(metaBucket)
		if err != nil {
			return err
		}
		return meta.Put(layoutKey, []byte(strconv.Itoa(newestKnownLayout+1)))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("boltstore: mark %s newer: %w", path, err)
	}
	return nil
}
