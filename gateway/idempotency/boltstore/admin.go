package boltstore

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

var _ idempotency.Admin = (*Store)(nil)

// listScanBudget bounds the records one List page examines, matching or
// not: a filter that matches few records ends a page early with a cursor
// instead of scanning the whole file in one call.
const listScanBudget = 10_000

// List returns the live records matching filter in the records bucket's
// key order (tenant, tool, key: the embedded store keeps no time index, so
// the order is not newest first). A tenant (and tool) filter seeks straight
// to its range; other filters are applied while scanning, at most
// listScanBudget records per page. The cursor is the last key examined.
// An approval's state is matched as of now (EXPIRED once it ran out).
func (s *Store) List(ctx context.Context, filter idempotency.ListFilter) (idempotency.Page, error) {
	return s.list(ctx, filter, false)
}

// list is List, of the records carrying an approval only when
// approvalsOnly.
func (s *Store) list(ctx context.Context, filter idempotency.ListFilter, approvalsOnly bool) (idempotency.Page, error) {
	if filter.Limit < 1 || filter.Limit > idempotency.MaxListLimit {
		return idempotency.Page{}, fmt.Errorf("boltstore: list: limit %d: want 1 … %d", filter.Limit, idempotency.MaxListLimit)
	}
	var after []byte
	if filter.Cursor != "" {
		var err error
		after, err = base64.RawURLEncoding.DecodeString(filter.Cursor)
		if err != nil || len(after) == 0 {
			return idempotency.Page{}, fmt.Errorf("boltstore: list: malformed cursor: %w", idempotency.ErrInvalidCursor)
		}
	}
	if err := ctx.Err(); err != nil {
		return idempotency.Page{}, err
	}
	var prefix []byte
	switch {
	case filter.Tenant != "" && filter.Tool != "":
		prefix = joinKey(filter.Tenant, filter.Tool)
	case filter.Tenant != "":
		prefix = joinKey(filter.Tenant)
	}
	needles, err := listNeedles(filter, approvalsOnly)
	if err != nil {
		return idempotency.Page{}, fmt.Errorf("boltstore: list: %w", err)
	}
	var page idempotency.Page
	err = s.db.View(func(tx *bolt.Tx) error {
		t, err := newTxn(tx, s.now())
		if err != nil {
			return err
		}
		page, err = t.list(filter, prefix, after, needles, approvalsOnly)
		return err
	})
	if err != nil {
		return idempotency.Page{}, fmt.Errorf("boltstore: list: %w", err)
	}
	return page, nil
}

// listNeedles are byte strings every encoded record matching filter
// contains (its state, tool and session as encode writes them), so the
// scan skips most non-matching records without decoding them. A quote
// inside a string value is escaped, so a needle cannot match inside one.
// EXPIRED is never stored (it is a pending or approved approval past its
// expiry), so it narrows the scan to approvals only.
func listNeedles(f idempotency.ListFilter, approvalsOnly bool) ([][]byte, error) {
	var needles [][]byte
	if approvalsOnly || f.State.IsApproval() {
		needles = append(needles, []byte(`"ap":`))
	}
	state := string(f.State)
	if f.State == idempotency.StateExpired || f.State == idempotency.StateConsumed {
		state = "" // never stored: matches decides
	}
	for _, field := range []struct{ name, value string }{{"st", state}, {"tl", f.Tool}, {"s", f.SessionID}} {
		if field.value == "" {
			continue
		}
		quoted, err := json.Marshal(field.value)
		if err != nil {
			return nil, err
		}
		needles = append(needles, append([]byte(`"`+field.name+`":`), quoted...))
	}
	return needles, nil
}

func containsAll(v []byte, needles [][]byte) bool {
	for _, n := range needles {
		if !bytes.Contains(v, n) {
			return false
		}
	}
	return true
}

func (t *txn) list(filter idempotency.ListFilter, prefix, after []byte, needles [][]byte, approvalsOnly bool) (idempotency.Page, error) {
	var page idempotency.Page
	c := t.records.Cursor()
	var k, v []byte
	if after != nil {
		k, v = c.Seek(after)
		if bytes.Equal(k, after) {
			k, v = c.Next()
		}
	} else {
		k, v = c.Seek(prefix)
	}
	for examined := 0; k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if len(page.Records) == filter.Limit || examined == listScanBudget {
			// More keys lie in range: continue after the last one examined.
			page.Cursor = base64.RawURLEncoding.EncodeToString(after)
			return page, nil
		}
		examined++
		after = k
		if !containsAll(v, needles) {
			continue
		}
		r, err := decodeRecord(v)
		if err != nil {
			return idempotency.Page{}, err
		}
		if r.expired(t.now) || (approvalsOnly && r.Approval == nil) {
			continue
		}
		rec := t.view(r)
		if approvalsOnly {
			rec = idempotency.ApprovalView(rec)
		}
		if !filter.Matches(rec) {
			continue
		}
		rec.Response = nil
		rec.CanonicalArguments = nil
		page.Records = append(page.Records, rec)
	}
	return page, nil
}

// FindExecution scans the records bucket for the execution id in one read
// transaction: the embedded store keeps no execution index (it would cost
// every claim a second write), and a scan that skips values not containing
// the id's bytes takes milliseconds for the records one process holds.
func (s *Store) FindExecution(ctx context.Context, executionID string) (idempotency.Record, error) {
	if err := ctx.Err(); err != nil {
		return idempotency.Record{}, err
	}
	if executionID == "" {
		return idempotency.Record{}, idempotency.ErrNotFound
	}
	// The id as it appears in an encoded record (same escaping as encode).
	quoted, err := json.Marshal(executionID)
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("boltstore: find execution: %w", err)
	}
	needle := append([]byte(`"x":`), quoted...)
	var rec idempotency.Record
	found := false
	err = s.db.View(func(tx *bolt.Tx) error {
		t, err := newTxn(tx, s.now())
		if err != nil {
			return err
		}
		c := t.records.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if !bytes.Contains(v, needle) {
				continue
			}
			r, err := decodeRecord(v)
			if err != nil {
				return err
			}
			if r.ExecutionID == executionID && !r.expired(t.now) {
				rec, found = t.view(r), true
				return nil
			}
		}
		return nil
	})
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("boltstore: find execution: %w", err)
	}
	if !found {
		return idempotency.Record{}, idempotency.ErrNotFound
	}
	return rec, nil
}

// updateLive runs change on scope's live record in one write transaction
// and writes the record as change left it. What change returns is the
// answer (answer: ErrNotFound without a live record, a refusal such as
// ErrNotResolvable), a result and not a failed batch: nothing is written
// with it. err is the transaction's failure.
func (s *Store) updateLive(ctx context.Context, scope idempotency.Scope, change func(t *txn, r *storedRecord) error) (rec idempotency.Record, answer, err error) {
	err = s.write(ctx, func(t *txn) error {
		rec, answer = idempotency.Record{}, nil
		key := scopeKey(scope)
		r, err := t.liveRecord(key)
		switch {
		case err != nil:
			return err
		case r == nil:
			answer = idempotency.ErrNotFound
			return nil
		}
		if answer = change(t, r); answer != nil {
			return nil
		}
		if err := t.putRecord(key, r); err != nil {
			return err
		}
		rec = r.toRecord()
		return nil
	})
	return rec, answer, err
}

// Resolve turns an UNKNOWN record, or an IN_PROGRESS one whose lease ran
// out, into COMPLETED with resp for ttl, in one write transaction. The
// record keeps its execution id, fingerprint, fencing token and step entry.
func (s *Store) Resolve(ctx context.Context, scope idempotency.Scope, resp idempotency.StoredResponse, ttl time.Duration) (idempotency.Record, error) {
	if ttl <= 0 {
		return idempotency.Record{}, fmt.Errorf("boltstore: resolve %v: ttl %v must be positive", scope, ttl)
	}
	rec, answer, err := s.updateLive(ctx, scope, func(t *txn, r *storedRecord) error {
		state := idempotency.State(r.State)
		if state != idempotency.StateUnknown && state != idempotency.StateInProgress ||
			state == idempotency.StateInProgress && r.leaseAlive(t.now) {
			// COMPLETED, an approval (nothing ran: there is no effect to
			// resolve), or a claim still running.
			return idempotency.ErrNotResolvable
		}
		r.State = string(idempotency.StateCompleted)
		r.Owner = ""
		r.Arguments = ""
		r.LeaseUntil = 0
		r.ReplayTTL = 0
		r.ExpiresAt = t.now.Add(ttl).UnixNano()
		r.Response = &storedResponse{Status: resp.Status, ContentType: resp.ContentType, Body: bytes.Clone(resp.Body)}
		return nil
	})
	if err == nil {
		err = answer
	}
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("boltstore: resolve %v: %w", scope, err)
	}
	return rec, nil
}
