package console_test

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

func TestApprovalsPendingThenApprove(t *testing.T) {
	f := newFixture(t)
	c := f.browser(t)
	f.signIn(t, c, "alice", adminToken, "/console/approvals")
	id := f.pendingApproval(t, "k1", `{"amount":2000,"txn_id":"t-9"}`, "refunds above 1 000 need finance")

	// The polled fragment shows it (what the page's script swaps in).
	f.clock.Add(90 * time.Second)
	_, frag := get(t, c, f.srv.URL+"/console/approvals/pending")
	for _, want := range []string{id, ">1m30s</time>", "refund", "acme", "s-1", "decide[1]", "refunds above 1 000 need finance", "&#34;amount&#34;: 2000"} {
		if !strings.Contains(frag, want) {
			t.Errorf("pending fragment lacks %q:\n%s", want, frag)
		}
	}
	_, page := get(t, c, f.srv.URL+"/console/approvals")
	resp, page := post(t, c, f.srv.URL+"/console/approvals/"+id+"/decide", url.Values{"csrf": {csrfOf(t, page)}, "action": {"approve"}, "note": {"ok by finance"}})
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/console/approvals" {
		t.Fatalf("approve: %d %s", resp.StatusCode, resp.Request.URL)
	}
	rec, err := f.store.GetApproval(context.Background(), id)
	if err != nil || rec.State != idempotency.StateApproved || rec.Approval.DecidedBy != "token:admin" || rec.Approval.ClaimedBy != "alice" || rec.Approval.Note != "ok by finance" {
		t.Fatalf("after approve: %+v %+v %v", rec.State, rec.Approval, err)
	}
	if !strings.Contains(page, "No pending approvals") || !strings.Contains(page, "ok by finance") {
		t.Fatalf("the page after approving:\n%s", page)
	}
}

func TestApproveFromTwoTabs(t *testing.T) {
	f := newFixture(t)
	alice, bob := f.browser(t), f.browser(t)
	f.signIn(t, alice, "alice", adminToken, "/console/approvals")
	f.signIn(t, bob, "bob", adminToken, "/console/approvals")
	id := f.pendingApproval(t, "k2", `{"amount":5000}`, "big")
	_, pageA := get(t, alice, f.srv.URL+"/console/approvals")
	_, pageB := get(t, bob, f.srv.URL+"/console/approvals")

	if resp, _ := post(t, alice, f.srv.URL+"/console/approvals/"+id+"/decide", url.Values{"csrf": {csrfOf(t, pageA)}, "action": {"approve"}}); resp.StatusCode != http.StatusOK {
		t.Fatalf("first approve: %d", resp.StatusCode)
	}
	decided, _ := f.store.GetApproval(context.Background(), id)
	resp, page := post(t, bob, f.srv.URL+"/console/approvals/"+id+"/decide", url.Values{"csrf": {csrfOf(t, pageB)}, "action": {"deny"}, "note": {"no"}})
	want := "Already approved by alice (token:admin) at " + decided.Approval.DecidedAt.UTC().Format("2006-01-02 15:04:05Z")
	if resp.StatusCode != http.StatusConflict || !strings.Contains(page, want) {
		t.Fatalf("second tab: %d, want %q in:\n%s", resp.StatusCode, want, page)
	}
	rec, _ := f.store.GetApproval(context.Background(), id)
	if rec.State != idempotency.StateApproved || rec.Approval.DecidedBy != "token:admin" || rec.Approval.ClaimedBy != "alice" || rec.Approval.Note != "" {
		t.Fatalf("the second decision changed the approval: %+v %+v", rec.State, rec.Approval)
	}
}

const xss = `<script>alert("x")</script>`

func TestHTMLInArgumentsReasonsAndNotesIsText(t *testing.T) {
	f := newFixture(t)
	c := f.browser(t)
	f.signIn(t, c, xss, adminToken, "/console/approvals")
	args, _ := json.Marshal(map[string]string{"memo": xss})
	f.pendingApproval(t, "k5", string(args), xss)
	denied := f.pendingApproval(t, "k6", string(args), "r")
	_, page := get(t, c, f.srv.URL+"/console/approvals")
	_, page = post(t, c, f.srv.URL+"/console/approvals/"+denied+"/decide", url.Values{"csrf": {csrfOf(t, page)}, "action": {"deny"}, "note": {xss}})
	unknown := f.unknownRecord(t, "k7", string(args))
	_, recordPage := get(t, c, f.srv.URL+"/console/uncertain/"+unknown.ExecutionID)
	for name, p := range map[string]string{"approvals": page, "record": recordPage} {
		if strings.Contains(p, "<script>alert") {
			t.Errorf("%s page carries the script as HTML:\n%s", name, p)
		}
	}
	// Shown as text: the escaped form is there, once per place it comes from.
	escaped := html.EscapeString(`<script>alert(`)
	if n := strings.Count(page, escaped); n < 4 { // arguments, reason, note, the signed-in name
		t.Errorf("approvals page shows the text %d times, want ≥ 4:\n%s", n, page)
	}
	if !strings.Contains(recordPage, escaped) {
		t.Errorf("record page does not show the argument as text")
	}
}
