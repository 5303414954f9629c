package receipts

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gowebpki/jcs"
)

// Checkpoint is a signed statement of a chain's head: "tenant's chain had
// the receipt seq, with this hash, sealed at time". A chain is only as
// trustworthy as its latest checkpoint: whoever can write the store can
// truncate or re-seal a chain, but cannot sign, so a chain shorter than
// a checkpoint, or whose receipt at a checkpoint's seq has another hash,
// is caught by [VerifyWith] holding the public key.
type Checkpoint struct {
	Tenant string `json:"tenant"`
	Seq    int64  `json:"seq"`
	// Hash is the hash of the receipt at Seq.
	Hash string `json:"hash"`
	// Time is the time of the receipt at Seq (not when it was signed):
	// so a checkpoint younger than the retention proves that receipt and
	// the ones after it cannot have expired.
	Time time.Time `json:"time"`
	// KeyID names the signing key: [KeyID] of its public key.
	KeyID string `json:"key_id"`
	// Sig is the Ed25519 signature of [Checkpoint.SignedBytes],
	// base64url without padding.
	Sig string `json:"sig"`
	// Anchor is the RFC 3161 time-stamp token of the checkpoint (DER,
	// base64), when receipts.anchor.tsa_url is set: see [TSA].
	Anchor string `json:"anchor,omitempty"`
}

// signedCheckpoint is what a checkpoint's signature covers.
type signedCheckpoint struct {
	Tenant string    `json:"tenant"`
	Seq    int64     `json:"seq"`
	Hash   string    `json:"hash"`
	Time   time.Time `json:"time"`
	KeyID  string    `json:"key_id"`
}

// SignedBytes are the bytes a checkpoint's signature covers: the JCS (RFC
// 8785) of the object {hash, key_id, seq, tenant, time}, time in UTC as
// receipts write it. `jq -cjS '{hash,key_id,seq,tenant,time}'` of the
// exported checkpoint writes the same bytes for printable strings.
func (c Checkpoint) SignedBytes() []byte {
	raw, err := json.Marshal(signedCheckpoint{Tenant: c.Tenant, Seq: c.Seq, Hash: c.Hash, Time: c.Time.UTC(), KeyID: c.KeyID})
	if err != nil { // strings, an int and a time in JSON's range
		panic(fmt.Sprintf("receipts: marshal checkpoint: %v", err))
	}
	out, err := jcs.Transform(raw)
	if err != nil { // json.Marshal's output is valid JSON
		panic(fmt.Sprintf("receipts: jcs checkpoint: %v", err))
	}
	return out
}

// CheckpointOf is the unsigned checkpoint of head, the last receipt of its
// chain.
func CheckpointOf(head Receipt) Checkpoint {
	return Checkpoint{Tenant: head.Tenant, Seq: head.Seq, Hash: head.Hash, Time: head.Time.UTC()}
}

// ErrChainDiverged: the chain no longer holds what its latest checkpoint
// signed (it is shorter, or has another receipt at that seq): a rollback,
// a truncation or a re-sealed chain. The checkpointer refuses to sign it.
var ErrChainDiverged = errors.New("receipts: chain diverged from its latest checkpoint")

// CheckpointStore keeps signed checkpoints with the chains. Every
// [Store] is one.
type CheckpointStore interface {
	// PutCheckpoint stores c with tenant c.Tenant's chain, beside the
	// ones already there (one per seq and key, and hash: a fork keeps
	// both), and names the tenant in the checkpoint index.
	PutCheckpoint(ctx context.Context, c Checkpoint) error
	// Checkpoints returns tenant's checkpoints in seq order.
	Checkpoints(ctx context.Context, tenant string) ([]Checkpoint, error)
	// LatestCheckpoints returns tenant's checkpoints of the highest seq
	// (one per key and hash): what the next checkpoint is checked against,
	// read without reading them all.
	LatestCheckpoints(ctx context.Context, tenant string) ([]Checkpoint, error)
	// CheckpointTenants is the checkpoint index: every tenant that has a
	// checkpoint, in order. It is kept apart from the chains' listing, so
	// a chain unlisted by hand is still exported and verified.
	CheckpointTenants(ctx context.Context) ([]string, error)
	// LastReceipt is tenant's receipt with the highest seq (false: none).
	LastReceipt(ctx context.Context, tenant string) (Receipt, bool, error)
}

// Checkpointer signs tenants' chain heads into their stores: what the
// gateway runs off the call path, and what POST
// /admin/v1/receipts/checkpoints asks for.
type Checkpointer struct {
	Store Store
	Key   *SigningKey
	// Retention is receipts.retention (0: [DefaultRetention]): the
	// receipt of a checkpoint older than it may have expired.
	Retention time.Duration
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Keys are the keys a stored checkpoint may be signed by (nil: Key's
	// alone): a latest checkpoint signed by none of them was forged in
	// the store, and nothing is signed after it.
	Keys KeySet
	// TSA, when set, anchors every checkpoint: a TSA that fails leaves
	// the checkpoint stored without its anchor, and Checkpoint answers it
	// with the error.
	TSA *TSA
}

// Checkpoint signs tenant's current head, anchors it (with a TSA) and
// stores the checkpoint. It answers false (and signs nothing) when the
// head is already checkpointed with this key, or the chain is empty;
// [ErrChainDiverged] when the chain does not hold what its latest
// checkpoint signed.
func (cp Checkpointer) Checkpoint(ctx context.Context, tenant string) (Checkpoint, bool, error) {
	head, ok, err := cp.Store.LastReceipt(ctx, tenant)
	if err != nil || !ok {
		return Checkpoint{}, false, err
	}
	known, err := cp.Store.LatestCheckpoints(ctx, tenant)
	if err != nil {
		return Checkpoint{}, false, err
	}
	if n := len(known); n > 0 {
		latest := known[n-1]
		if err := cp.trusted().Check(latest); err != nil {
			return Checkpoint{}, false, fmt.Errorf("receipts: checkpoint %s: the latest checkpoint, seq %d, is %v: %w", tenant, latest.Seq, err, ErrChainDiverged)
		}
		at, err := receiptAt(ctx, cp.Store, tenant, latest.Seq)
		if err != nil {
			return Checkpoint{}, false, err
		}
		expired := at == nil && head.Seq > latest.Seq && cp.mayHaveExpired(latest.Time)
		if (at == nil && !expired) || (at != nil && at.Hash != latest.Hash) {
			return Checkpoint{}, false, fmt.Errorf("receipts: checkpoint %s: seq %d: %w", tenant, latest.Seq, ErrChainDiverged)
		}
		for _, c := range known {
			if c.Seq == head.Seq && c.KeyID == cp.Key.ID() {
				return c, false, nil
			}
		}
	}
	c := cp.Key.Sign(CheckpointOf(head))
	var anchorErr error
	if cp.TSA != nil {
		if anchored, err := cp.TSA.Anchor(ctx, c); err != nil {
			anchorErr = fmt.Errorf("receipts: checkpoint %s seq %d stored without its anchor: %w", tenant, c.Seq, err)
		} else {
			c = anchored
		}
	}
	if err := cp.Store.PutCheckpoint(ctx, c); err != nil {
		return Checkpoint{}, false, err
	}
	return c, true, anchorErr
}

// trusted is cp.Keys, or Key's alone.
func (cp Checkpointer) trusted() KeySet {
	if len(cp.Keys) > 0 {
		return cp.Keys
	}
	ks := KeySet{}
	ks.Add(cp.Key.Public())
	return ks
}

// mayHaveExpired reports whether a receipt sealed at t may be gone by
// retention.
func (cp Checkpointer) mayHaveExpired(t time.Time) bool {
	now := time.Now
	if cp.Now != nil {
		now = cp.Now
	}
	return t.Before(now().Add(-retentionOr(cp.Retention)))
}

// retentionOr is r, or [DefaultRetention] when r is 0.
func retentionOr(r time.Duration) time.Duration {
	if r <= 0 {
		return DefaultRetention
	}
	return r
}

// receiptAt reads tenant's receipt at seq (nil: none).
func receiptAt(ctx context.Context, s Store, tenant string, seq int64) (*Receipt, error) {
	page, _, err := s.List(ctx, Filter{Tenant: tenant, After: seq - 1, Limit: 1})
	if err != nil {
		return nil, err
	}
	if len(page) == 0 || page[0].Seq != seq {
		return nil, nil
	}
	return &page[0], nil
}

// EncodeCheckpoint is the one stored form of a checkpoint: its JSON
// object on one line.
func EncodeCheckpoint(c Checkpoint) ([]byte, error) {
	c.Time = c.Time.UTC()
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("receipts: encode checkpoint %s seq %d: %w", c.Tenant, c.Seq, err)
	}
	return b, nil
}

// DecodeCheckpoint reads a checkpoint written by [EncodeCheckpoint].
func DecodeCheckpoint(line []byte) (Checkpoint, error) {
	return decodeJSONLine[Checkpoint](line, "decode checkpoint")
}

// DecodeCheckpoints reads the checkpoints a store keeps as text, in order.
func DecodeCheckpoints(lines []string) ([]Checkpoint, error) {
	out := make([]Checkpoint, 0, len(lines))
	for _, line := range lines {
		c, err := DecodeCheckpoint([]byte(line))
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// sigEncoding is how a checkpoint writes its signature.
var sigEncoding = base64.RawURLEncoding

// Sign signs c (its KeyID set to k's) and answers it with its Sig.
func (k *SigningKey) Sign(c Checkpoint) Checkpoint {
	c.Time = c.Time.UTC()
	c.KeyID = k.id
	c.Sig = sigEncoding.EncodeToString(ed25519.Sign(k.private, c.SignedBytes()))
	return c
}
