package decide

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/gowebpki/jcs"
)

// Digest is the SHA-256 (lowercase hex) of the tool's decision
// configuration, which receipts carry as `policy`: two receipts with the
// same digest were decided by the same rules. It is computed over the JCS
// (RFC 8785) form of the JSON array of the rules as [Rule]'s JSON tags write
// them, after normalization (an [Approve] rule's approver filled in as
// "operator" when omitted), so the spellings of one policy hash alike. A
// tool without rules has the empty digest.
func (p *Policy) Digest() string {
	if p == nil {
		return ""
	}
	return p.digest
}

// digest computes [Policy.Digest] for normalized rules.
func digest(rules []compiledRule) (string, error) {
	if len(rules) == 0 {
		return "", nil
	}
	plain := make([]Rule, len(rules))
	for i, r := range rules {
		plain[i] = r.Rule
	}
	raw, err := json.Marshal(plain)
	if err != nil {
		return "", fmt.Errorf("digest: %w", err)
	}
	canonical, err := jcs.Transform(raw)
	if err != nil {
		return "", fmt.Errorf("digest: canonical JSON: %w", err)
	}
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:]), nil
}
