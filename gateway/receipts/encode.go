package receipts

import (
	"encoding/json"
	"fmt"
)

// Encode is the one stored and exported form of a receipt: its JSON
// object on one line, without the newline.
func Encode(r Receipt) ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("receipts: encode seq %d of %s: %w", r.Seq, r.Tenant, err)
	}
	return b, nil
}

// Decode reads a receipt written by [Encode].
func Decode(line []byte) (Receipt, error) {
	return decodeJSONLine[Receipt](line, "decode")
}

// decodeJSONLine reads one stored JSON line as a T; what names the step in
// the error.
func decodeJSONLine[T any](line []byte, what string) (T, error) {
	var v T
	if err := json.Unmarshal(line, &v); err != nil {
		return v, fmt.Errorf("receipts: %s: %w", what, err)
	}
	return v, nil
}
