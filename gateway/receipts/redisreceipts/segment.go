package redisreceipts

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/toolgateway/toolgateway/gateway/receipts"
)

// A sealed segment is segmentSize consecutive receipts of a chain,
// compacted into one member of <prefix>{receipts:<tenant>}:segments
// (score: the segment's number n, for the seqs n*segmentSize+1 to
// (n+1)*segmentSize): what a receipt costs in Redis memory is then its
// share of one compressed string instead of a sorted-set member of ~520
// bytes of JSON. The compact form drops what the chain and the key
// derive (the tenant, a seq that follows its predecessor's, a prev that
// is its predecessor's hash), stores hex as bytes and times as deltas,
// and is deflated; the stored JSON lines are re-derived from it exactly,
// which compaction checks before it replaces them (a segment whose lines
// do not round-trip byte for byte, e.g. edited by hand, stays as lines).
const segmentSize = 256

// segmentVersion is the first byte of a segment's compact form, so a
// later form can be told apart: 2 holds a budget receipt's budget and
// amount after the strings of 1, which a segment written before budget
// receipts existed still reads as.
const segmentVersion = 2

// Flags of a record in a segment.
const (
	flagSeq  = 1 << iota // the seq is written: it does not follow the previous record's
	flagPrev             // the prev is written: it is not the previous record's hash
)

// segmentWriter writes a segment's records.
type segmentWriter struct {
	buf      []byte
	prev     *receipts.Receipt
	prevTime int64
}

// record appends r, the next receipt, in its compact form.
func (w *segmentWriter) record(r receipts.Receipt) {
	var flags uint64
	if w.prev == nil || r.Seq != w.prev.Seq+1 {
		flags |= flagSeq
	}
	if w.prev == nil || r.Prev != w.prev.Hash {
		flags |= flagPrev
	}
	w.buf = binary.AppendUvarint(w.buf, flags)
	if flags&flagSeq != 0 {
		w.buf = binary.AppendVarint(w.buf, r.Seq)
	}
	at := r.Time.UnixNano()
	w.buf = binary.AppendVarint(w.buf, at-w.prevTime)
	w.prevTime = at
	members, n := stringsOf(&r, segmentVersion)
	for _, s := range members[:n] {
		w.str(*s)
	}
	w.buf = binary.AppendVarint(w.buf, int64(r.Status))
	if flags&flagPrev != 0 {
		w.str(r.Prev)
	}
	w.str(r.Hash)
	w.prev = &r
}

// str writes s as its length, doubled, plus one when s is lowercase hex
// of even length written as its bytes (hashes, keys, policies: half the
// size).
func (w *segmentWriter) str(s string) {
	if len(s) > 0 && len(s)%2 == 0 && isLowerHex(s) {
		w.buf = binary.AppendUvarint(w.buf, uint64(len(s)/2)*2+1)
		w.buf, _ = hex.AppendDecode(w.buf, []byte(s)) // isLowerHex: no error
		return
	}
	w.buf = binary.AppendUvarint(w.buf, uint64(len(s))*2)
	w.buf = append(w.buf, s...)
}

func isLowerHex(s string) bool {
	for i := range len(s) {
		if !lowerHexDigit[s[i]] {
			return false
		}
	}
	return true
}

// lowerHexDigit tells the bytes of lowercase hex: a table, as every
// string of every receipt of a segment is tested.
var lowerHexDigit = func() (t [256]bool) {
	for _, c := range "0123456789abcdef" {
		t[c] = true
	}
	return t
}()

// stringsOf are r's string members in the order a record of a segment
// of version holds them (an array, so a record costs no allocation for
// it).
func stringsOf(r *receipts.Receipt, version byte) ([17]*string, int) {
	members := [17]*string{(*string)(&r.Event), &r.Tool, &r.Key, &r.Session, &r.Step, &r.ExecutionID, &r.Decision,
		&r.Rule, &r.Policy, &r.Requester, &r.By, &r.ClaimedBy, &r.Note, &r.Definition, &r.Observe, &r.Budget, &r.Amount}
	if version >= 2 {
		return members, 17
	}
	return members, 15
}

// encodeSegment is the compact form of lines, tenant's stored receipts
// in seq order, or ok false when they cannot be re-derived from it byte
// for byte (a line not as [receipts.Encode] writes it, another tenant's).
// It reads every line as JSON and writes every re-derived line again:
// what a segment read back from Redis needs; encodeSealed is the cheaper
// check for receipts this process sealed.
func encodeSegment(tenant string, lines []string) (blob []byte, ok bool, err error) {
	rs := make([]receipts.Receipt, len(lines))
	for i, line := range lines {
		if rs[i], err = receipts.Decode([]byte(line)); err != nil || rs[i].Tenant != tenant {
			return nil, false, nil
		}
	}
	if blob, err = encodeRecords(rs); err != nil {
		return nil, false, err
	}
	back, err := decodeSegment(tenant, blob)
	if err != nil || len(back) != len(lines) {
		return nil, false, nil
	}
	for i, line := range back {
		if string(line.line) != lines[i] {
			return nil, false, nil
		}
	}
	return blob, true, nil
}

// encodeSealed is the compact form of run, receipts of tenant's chain in
// seq order as the appender sealed them (each Line is [receipts.Encode]
// of its Receipt), or ok false when they cannot be re-derived from it.
// Because each line is its receipt's encoding, re-deriving the receipts
// field for field proves the lines re-derive byte for byte, without
// reading or writing JSON.
func encodeSealed(tenant string, run []receipts.Sealed) (blob []byte, ok bool, err error) {
	rs := make([]receipts.Receipt, len(run))
	for i, sealed := range run {
		if rs[i] = sealed.Receipt; rs[i].Tenant != tenant {
			return nil, false, nil
		}
	}
	raw := writeRecords(rs)
	// Checked before deflate: inflating what deflate wrote gives it back
	// (the library's contract), so the check need not pay for it.
	back, err := readRecords(tenant, raw)
	if err != nil || len(back) != len(rs) {
		return nil, false, nil
	}
	for i := range back {
		if !sameReceipt(back[i], rs[i]) {
			return nil, false, nil
		}
	}
	if blob, err = deflate(raw); err != nil {
		return nil, false, err
	}
	return blob, true, nil
}

// sameReceipt reports whether a and b encode to the same line: every
// member equal, the times the same instant in the same location.
func sameReceipt(a, b receipts.Receipt) bool {
	if !a.Time.Equal(b.Time) || a.Time.Location() != b.Time.Location() {
		return false
	}
	a.Time, b.Time = time.Time{}, time.Time{}
	return a == b
}

// flateWriters keeps compressors for reuse: a compressor is ~1 MB of
// tables to allocate and clear, more than compressing one segment costs.
var flateWriters = sync.Pool{New: func() any {
	w, _ := flate.NewWriter(nil, segmentLevel) // a valid level: no error
	return w
}}

// segmentLevel is the deflate level of a segment. Measured with
// BenchmarkEncodeSegment/sealed: BestSpeed seals a segment in ~0.65 of
// the default level's time for 2 % more bytes (74.1 against 72.7 a
// receipt); HuffmanOnly is no faster and twice the size.
const segmentLevel = flate.BestSpeed

// encodeRecords writes rs, consecutive receipts of one chain, in the
// compact form and deflates it.
func encodeRecords(rs []receipts.Receipt) ([]byte, error) {
	return deflate(writeRecords(rs))
}

// writeRecords writes rs, consecutive receipts of one chain, in the
// compact form (not deflated).
func writeRecords(rs []receipts.Receipt) []byte {
	w := segmentWriter{buf: make([]byte, 1, 160*len(rs))}
	w.buf[0] = segmentVersion
	for _, r := range rs {
		w.record(r)
	}
	return w.buf
}

// deflate compresses a segment's compact form.
func deflate(raw []byte) ([]byte, error) {
	var out bytes.Buffer
	out.Grow(len(raw) / 2)
	zw := flateWriters.Get().(*flate.Writer)
	defer flateWriters.Put(zw)
	zw.Reset(&out)
	if _, err := zw.Write(raw); err != nil {
		return nil, fmt.Errorf("redisreceipts: compress segment: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("redisreceipts: compress segment: %w", err)
	}
	return out.Bytes(), nil
}

// errSegment: a segment's compact form does not read.
var errSegment = errors.New("redisreceipts: malformed segment")

// storedLine is a receipt's line as the store holds it (or re-derives
// it) and its seq.
type storedLine struct {
	seq  int64
	line []byte
}

// decodeSegment re-derives the stored lines of a segment of tenant's
// chain from its compact form.
func decodeSegment(tenant string, blob []byte) ([]storedLine, error) {
	rs, err := decodeRecords(tenant, blob)
	if err != nil {
		return nil, err
	}
	lines := make([]storedLine, len(rs))
	for i, r := range rs {
		line, err := receipts.Encode(r)
		if err != nil {
			return nil, err
		}
		lines[i] = storedLine{seq: r.Seq, line: line}
	}
	return lines, nil
}

// decodeRecords re-derives the receipts of a segment of tenant's chain
// from its compact form.
func decodeRecords(tenant string, blob []byte) ([]receipts.Receipt, error) {
	raw, err := io.ReadAll(flate.NewReader(bytes.NewReader(blob)))
	if err != nil {
		return nil, fmt.Errorf("redisreceipts: decompress segment: %w", err)
	}
	return readRecords(tenant, raw)
}

// readRecords reads the receipts of a segment of tenant's chain from its
// compact form, inflated.
func readRecords(tenant string, raw []byte) ([]receipts.Receipt, error) {
	if len(raw) == 0 || raw[0] < 1 || raw[0] > segmentVersion {
		return nil, errSegment
	}
	version := raw[0]
	rd := segmentReader{buf: raw[1:]}
	rs := make([]receipts.Receipt, 0, segmentSize)
	var prev *receipts.Receipt
	var at int64
	for len(rd.buf) > 0 {
		r := receipts.Receipt{Tenant: tenant}
		flags := rd.uvarint()
		switch {
		case flags&flagSeq != 0:
			r.Seq = rd.varint()
		case prev != nil:
			r.Seq = prev.Seq + 1
		default:
			return nil, errSegment
		}
		at += rd.varint()
		r.Time = time.Unix(0, at).UTC()
		members, n := stringsOf(&r, version)
		for _, s := range members[:n] {
			*s = rd.str()
		}
		r.Status = int(rd.varint())
		switch {
		case flags&flagPrev != 0:
			r.Prev = rd.str()
		case prev != nil:
			r.Prev = prev.Hash
		default:
			return nil, errSegment
		}
		r.Hash = rd.str()
		if rd.err != nil {
			return nil, rd.err
		}
		rs = append(rs, r)
		prev = &r
	}
	return rs, nil
}

// segmentReader reads a segment's records; the first malformed value
// sets err and every later read answers zero.
type segmentReader struct {
	buf []byte
	err error
}

func (r *segmentReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.buf)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.buf = r.buf[n:]
	return v
}

func (r *segmentReader) varint() int64 {
	v, n := binary.Varint(r.buf)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.buf = r.buf[n:]
	return v
}

func (r *segmentReader) str() string {
	n := r.uvarint()
	size := n / 2
	if size > uint64(len(r.buf)) {
		r.fail()
		return ""
	}
	b := r.buf[:size]
	r.buf = r.buf[size:]
	if n%2 == 1 {
		return hex.EncodeToString(b)
	}
	return string(b)
}

func (r *segmentReader) fail() {
	if r.err == nil {
		r.err = errSegment
	}
	r.buf = nil
}
