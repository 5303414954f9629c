package decide_test

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/toolgateway/toolgateway/gateway/decide"
)

// TestDigestIsSHA256OfJCS checks the digest against the canonical text
// written out by hand: the form a receipt reader can reproduce.
func TestDigestIsSHA256OfJCS(t *testing.T) {
	p := mustCompile(t, "refund", refundRules)
	canonical := `[{"decision":"allow","when":"args.amount <= 1000"},` +
		`{"approver":"operator","decision":"approve","reason":"refunds above 1 000 need finance","when":"args.amount <= 10000"},` +
		`{"decision":"deny","reason":"refunds above 10 000 are not an agent's call"}]`
	sum := sha256.Sum256([]byte(canonical))
	if got, want := p.Digest(), hex.EncodeToString(sum[:]); got != want {
		t.Errorf("Digest = %s, want %s", got, want)
	}
}

// TestDigestIdentifiesPolicy checks spellings of one policy hash alike and
// any change of meaning changes the digest.
func TestDigestIdentifiesPolicy(t *testing.T) {
	base := mustCompile(t, "refund", refundRules).Digest()
	explicit := append([]decide.Rule(nil), refundRules...)
	explicit[1].Approver = decide.Operator
	if got := mustCompile(t, "refund", explicit).Digest(); got != base {
		t.Errorf("explicit default approver: digest %s, want %s", got, base)
	}
	if got := mustCompile(t, "other", refundRules).Digest(); got != base {
		t.Errorf("same rules, other tool: digest %s, want %s (the digest is the rules')", got, base)
	}
	for name, change := range map[string]func(r []decide.Rule){
		"when":     func(r []decide.Rule) { r[0].When = "args.amount < 1000" },
		"decision": func(r []decide.Rule) { r[2].Decision = decide.Approve },
		"reason":   func(r []decide.Rule) { r[2].Reason = "no" },
		"approver": func(r []decide.Rule) { r[1].Approver = decide.Caller },
		"order":    func(r []decide.Rule) { r[0], r[1] = r[1], r[0] },
	} {
		rules := append([]decide.Rule(nil), refundRules...)
		change(rules)
		if got := mustCompile(t, "refund", rules).Digest(); got == base {
			t.Errorf("changed %s: digest unchanged", name)
		}
	}
}
