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
	var r Receipt
	if err := json.Unmarshal(line, &r); err != nil {
		return r, fmt.Errorf("receipts: decode: %w", err)
	}
	return r, nil
}
