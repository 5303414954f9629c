package redisreceipts

import "github.com/toolgateway/toolgateway/gateway/receipts"

// Test access to the compact form, as an attacker who read this package
// has it.

// SegmentSize is segmentSize.
const SegmentSize = segmentSize

// DecodeSegment returns the stored lines of a compact segment.
func DecodeSegment(tenant string, blob []byte) ([]string, error) {
	lines, err := decodeSegment(tenant, blob)
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = string(l.line)
	}
	return out, err
}

// EncodeSegment is the compact form of lines (ok false: they do not
// re-derive exactly).
func EncodeSegment(tenant string, lines []string) ([]byte, bool, error) {
	return encodeSegment(tenant, lines)
}

// EncodeSealed is the compact form of run, receipts this process sealed.
func EncodeSealed(tenant string, run []receipts.Sealed) ([]byte, bool, error) {
	return encodeSealed(tenant, run)
}
