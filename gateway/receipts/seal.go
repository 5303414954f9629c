package receipts

import (
	"encoding/json"
	"fmt"

	"github.com/gowebpki/jcs"
)

// Head is the last receipt of a tenant's chain as a store keeps it: what
// the next receipt is sealed after. The zero Head is an empty chain.
type Head struct {
	Seq  int64
	Hash string
}

// HeadOf is the head a chain has once r is its last receipt.
func HeadOf(r Receipt) Head { return Head{Seq: r.Seq, Hash: r.Hash} }

// Seal makes r the receipt after prev (nil: the first of its chain): it
// sets Seq to prev's + 1 (or 1), Prev to prev's hash (or ""), Time to UTC,
// and Hash.
func Seal(prev *Receipt, r Receipt) Receipt {
	var h Head
	if prev != nil {
		h = HeadOf(*prev)
	}
	return SealAfter(h, r)
}

// SealAfter is [Seal] after a head rather than a whole receipt: what a
// store knows of a chain it appends to. r.Time must lie in the years
// 0–9999 (what JSON encodes); SealAfter panics otherwise, as on any other
// programming error ([Appender.Append] checks it).
func SealAfter(head Head, r Receipt) Receipt {
	r.Seq = head.Seq + 1
	r.Prev = head.Hash
	r.Time = r.Time.UTC()
	r.Hash = ""
	r.Hash = hashOf(r)
	return r
}

// hashOf is the hash of r, whose Hash must be empty (and so absent): the
// SHA-256 of its JCS, written by canonical.
func hashOf(r Receipt) string {
	if b, ok := canonical(make([]byte, 0, 512), r); ok {
		return sha256Hex(b)
	}
	return sha256Hex(genericJCS(r))
}

// genericJCS is the JCS of r the generic way: jcs.Transform of its JSON.
// It is the reference canonical is tested against.
func genericJCS(r Receipt) []byte {
	raw, err := json.Marshal(r)
	if err != nil { // a Receipt holds only strings, ints and a time
		panic(fmt.Sprintf("receipts: marshal: %v", err))
	}
	out, err := jcs.Transform(raw)
	if err != nil { // json.Marshal's output is valid JSON
		panic(fmt.Sprintf("receipts: jcs: %v", err))
	}
	return out
}

// Valid reports whether r's Hash is the hash of its content.
func Valid(r Receipt) bool {
	want := r.Hash
	r.Hash = ""
	return want != "" && hashOf(r) == want
}
