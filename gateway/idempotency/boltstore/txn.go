package boltstore

import (
	"bytes"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// txn is one transaction's view of the three buckets, with the record
// operations every Store method is built from.
type txn struct {
	records *bolt.Bucket
	steps   *bolt.Bucket
	fencing *bolt.Bucket
	// approvals maps approval ids to record keys (approvals.go).
	approvals *bolt.Bucket
	// effects maps effect keys to the record keys holding them (effects.go).
	effects *bolt.Bucket
	// budgets holds budget reservations by bucket (budgets.go).
	budgets *bolt.Bucket
	// outbox is the receipt outbox (outbox.go); nil when off.
	outbox *bolt.Bucket
	now    time.Time
}

// newTxn reads the file's layout version first: a transaction on a
// layout this code does not know fails with an *idempotency.LayoutError.
func newTxn(tx *bolt.Tx, now time.Time) (*txn, error) {
	if err := checkLayout(tx); err != nil {
		return nil, err
	}
	t := &txn{
		records:   tx.Bucket(recordsBucket),
		steps:     tx.Bucket(stepsBucket),
		fencing:   tx.Bucket(fencingBucket),
		approvals: tx.Bucket(approvalsBucket),
		effects:   tx.Bucket(effectsBucket),
		budgets:   tx.Bucket(budgetsBucket),
		outbox:    tx.Bucket(outboxBucket),
		now:       now,
	}
	if t.records == nil || t.steps == nil || t.fencing == nil || t.approvals == nil || t.effects == nil || t.budgets == nil {
		return nil, fmt.Errorf("boltstore: buckets missing")
	}
	return t, nil
}

// liveRecord returns the record under key, or nil if there is none or it
// has expired: an expired record is absent on every read path, whether or
// not the sweeper has removed it yet.
func (t *txn) liveRecord(key []byte) (*storedRecord, error) {
	value := t.records.Get(key)
	if value == nil {
		return nil, nil
	}
	r, err := decodeRecord(value)
	if err != nil {
		return nil, err
	}
	if r.expired(t.now) {
		return nil, nil
	}
	return r, nil
}

func (t *txn) putRecord(key []byte, r *storedRecord) error {
	value, err := r.encode()
	if err != nil {
		return err
	}
	if err := t.records.Put(key, value); err != nil {
		return fmt.Errorf("put record: %w", err)
	}
	return nil
}

// deleteRecord removes the record under key and its step entry, if that
// entry still points at this record (another record may have been bound to
// the step since, with the step guard off).
func (t *txn) deleteRecord(key []byte, r *storedRecord) error {
	if err := t.records.Delete(key); err != nil {
		return fmt.Errorf("delete record: %w", err)
	}
	if r.Approval != nil {
		if err := t.approvals.Delete([]byte(r.Approval.ID)); err != nil {
			return fmt.Errorf("delete approval entry: %w", err)
		}
	}
	if err := t.freeEffect(key, r); err != nil {
		return err
	}
	if r.Step == nil {
		return nil
	}
	sk := stepKey(r.Tenant, stepOf(r.Step))
	if bytes.Equal(t.steps.Get(sk), key) {
		if err := t.steps.Delete(sk); err != nil {
			return fmt.Errorf("delete step entry: %w", err)
		}
	}
	return nil
}

// nextFencingToken hands out a token larger than any earlier one of the
// scope and persists it. The floor of the current time in microseconds
// lets the sweeper drop a counter once the clock has passed it: any later
// token is then larger anyway.
func (t *txn) nextFencingToken(key []byte, current int64) (int64, error) {
	last := max(current, decodeToken(t.fencing.Get(key)))
	token := max(last+1, t.now.UnixMicro())
	if err := t.fencing.Put(key, encodeToken(token)); err != nil {
		return 0, fmt.Errorf("put fencing token: %w", err)
	}
	return token, nil
}
