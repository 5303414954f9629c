package console_test

import (
	"strings"
	"testing"
)

// TestPagesShowDirectionOverridesEscaped: an argument holding U+202E
// (right-to-left override) shows as the escape "\u202e" on the Approvals
// page, its polled fragment and the uncertain record's page, never as
// the character, which would show "invoice\u202efdp.exe" as "invoiceexe.pdf".
func TestPagesShowDirectionOverridesEscaped(t *testing.T) {
	f := newFixture(t)
	c := f.browser(t)
	f.signIn(t, c, "alice", adminToken, "/console/approvals")
	args := "{\"file\":\"invoice\u202efdp.exe\",\"note\":\"zero\u200bwidth \u2066isolate\u2069\"}"
	f.pendingApproval(t, "k1", args, "attachments need a person")
	unknown := f.unknownRecord(t, "k2", args)
	for _, path := range []string{"/console/approvals", "/console/approvals/pending", "/console/uncertain/" + unknown.ExecutionID} {
		_, page := get(t, c, f.srv.URL+path)
		if !strings.Contains(page, `invoice\u202efdp.exe`) || !strings.Contains(page, `zero\u200bwidth \u2066isolate\u2069`) {
			t.Errorf("%s does not show the escapes:\n%s", path, page)
		}
		if strings.ContainsAny(page, "\u202e\u200b\u2066\u2069") {
			t.Errorf("%s holds an invisible or direction-changing character", path)
		}
	}
}
