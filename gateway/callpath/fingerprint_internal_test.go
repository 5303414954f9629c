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

// TestRecordIdentity: what a claim asks the store to keep: nothing for
// the gateway's own identity, the member and id of a host call id, the
// person and the window of a fingerprint.
func TestRecordIdentity(t *testing.T) {
	at := time.Date(2026, 12, 7, 10, 40, 12, 0, time.UTC)
	for id, want := range map[*Identity]string{
		{SessionID: "run-7", StepIndex: 3, HasStep: true}:                      "",
		{HostMeta: "claudecode/toolUseId", HostCallID: "toolu_01"}:             `{"kind":"host","host_meta":"claudecode/toolUseId","host_call_id":"toolu_01"}`,
		ptr(FingerprintIdentity("host-user:op.example:ada", 24*time.Hour, at)): `{"kind":"fingerprint","principal":"host-user:op.example:ada","window_start":"2026-12-07T00:00:00Z","window":"24h0m0s"}`,
	} {
		if got := recordIdentity(*id); got != want {
			t.Errorf("%+v: %s, want %s", *id, got, want)
		}
	}
}

func ptr[T any](v T) *T { return &v }
