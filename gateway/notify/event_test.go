package notify

import (
	"testing"
	"time"
)

// TestConsoleURL checks the link with and without a base URL.
func TestConsoleURL(t *testing.T) {
	for _, tc := range []struct{ base, want string }{
		{"", ""},
		{"https://gw.example.com", "https://gw.example.com/console/approvals/01JABC"},
		{"https://gw.example.com/admin/", "https://gw.example.com/admin/console/approvals/01JABC"},
	} {
		if got := ConsoleURL(tc.base, "01JABC"); got != tc.want {
			t.Errorf("ConsoleURL(%q) = %q, want %q", tc.base, got, tc.want)
		}
	}
}

// TestBody checks the wire bytes, with every field and without the
// optional ones.
func TestBody(t *testing.T) {
	at := time.Date(2026, 12, 4, 21, 0, 0, 0, time.FixedZone("CET", 3600))
	full := Pending{
		ApprovalID: "01JABC", Tool: "refund", Tenant: "acme", Session: "s-1", Step: 4, HasStep: true,
		CanonicalArguments: []byte(`{"amount":2000}`), Rule: 1, Reason: "finance",
		RequestedAt: at, ExpiresAt: at.Add(24 * time.Hour),
	}
	got, err := body(full, "https://gw.example.com")
	want := `{"type":"approval.pending","approval_id":"01JABC","tool":"refund","tenant":"acme","session":"s-1","step":4,` +
		`"canonical_arguments":{"amount":2000},"rule":1,"reason":"finance","requested_at":"2026-12-04T20:00:00Z",` +
		`"expires_at":"2026-12-05T20:00:00Z","console_url":"https://gw.example.com/console/approvals/01JABC"}`
	if err != nil || string(got) != want {
		t.Errorf("body = %s, %v\nwant %s", got, err, want)
	}
	bare := full
	bare.Session, bare.HasStep, bare.Reason, bare.Rule = "", false, "", 0
	got, err = body(bare, "")
	want = `{"type":"approval.pending","approval_id":"01JABC","tool":"refund","tenant":"acme",` +
		`"canonical_arguments":{"amount":2000},"rule":0,"requested_at":"2026-12-04T20:00:00Z","expires_at":"2026-12-05T20:00:00Z"}`
	if err != nil || string(got) != want {
		t.Errorf("bare body = %s, %v\nwant %s", got, err, want)
	}
	bare.CanonicalArguments = []byte(`{"amount":`)
	if _, err := body(bare, ""); err == nil {
		t.Error("body accepted arguments that are not JSON")
	}
}
