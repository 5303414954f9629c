package callpath

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"
)

// TestFingerprintKey: the key is SHA-256 of the string docs/mcp.md gives,
// and windows are aligned to the Unix epoch: two instants in one window
// share a key, the next window's does not, and another person's never.
func TestFingerprintKey(t *testing.T) {
	const principal = "host-user:login.example.com:ada"
	args := []byte(`{"amount":5}`)
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	id := FingerprintIdentity(principal, 24*time.Hour, at("2026-12-07T10:40:12Z"))
	if !id.WindowStart.Equal(at("2026-12-07T00:00:00Z")) {
		t.Fatalf("window start %s, want midnight UTC", id.WindowStart)
	}
	sum := sha256.Sum256([]byte("fp:" + principal + ":refund:" + string(args) + ":" + "1796601600"))
	if got := fingerprintKey(principal, "refund", args, id.WindowStart); got != hex.EncodeToString(sum[:]) {
		t.Fatalf("key %s, want SHA-256 of the documented string", got)
	}
	key := func(principal string, when string, window time.Duration) string {
		id := FingerprintIdentity(principal, window, at(when))
		return fingerprintKey(id.FingerprintPrincipal, "refund", args, id.WindowStart)
	}
	if key(principal, "2026-12-07T10:40:12Z", time.Hour) != key(principal, "2026-12-07T10:59:59Z", time.Hour) {
		t.Error("two calls in one hour window have different keys")
	}
	if key(principal, "2026-12-07T10:59:59Z", time.Hour) == key(principal, "2026-12-07T11:00:00Z", time.Hour) {
		t.Error("a call in the next window has the same key")
	}
	if key(principal, "2026-12-07T10:40:12Z", time.Hour) == key("host-user:login.example.com:bob", "2026-12-07T10:40:12Z", time.Hour) {
		t.Error("two people's same call has one key")
	}
	if IdentityLabel(id) != "fingerprint" {
		t.Errorf("identity label %q", IdentityLabel(id))
	}
}
