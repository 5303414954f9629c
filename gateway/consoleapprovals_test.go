package gateway_test

import (
	"crypto/sha256"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/decide"
	"github.com/toolgateway/toolgateway/gateway/gatewaytest"
	"github.com/toolgateway/toolgateway/wire"
)

// TestConsoleApprovalPageShowsRequesterAndRefusals: through the gateway's
// own console, an approval's deep link shows who asked (the tenant token's
// principal); a decision by someone the rule's approvers leave out is
// refused on the page with not_an_approver's message and runs nothing; a
// decision by an approver lands on the page with its confirmation and the
// call then runs once at the tool.
func TestConsoleApprovalPageShowsRequesterAndRefusals(t *testing.T) {
	h, tool := trustHarness(t, []decide.Rule{
		{When: "args.amount > 1000", Decision: decide.Approve, Approvers: decide.Approvers{Expr: `"finance" in claims.groups`}},
		{Decision: decide.Approve},
	})
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	read := func(resp *http.Response, err error) (*http.Response, string) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	_, page := read(c.Get(h.Srv.URL + "/console/signin"))
	read(c.PostForm(h.Srv.URL+"/console/signin", url.Values{"csrf": {consoleCSRF.FindStringSubmatch(page)[1]}, "name": {"olga"}, "token": {adminToken}}))

	big := acmeRefund("c", 1, "5000")
	bigID := pendingID(t, h.Do(big))
	resp, page := read(c.Get(h.Srv.URL + "/console/approvals/" + bigID))
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, `<dd class="who" id="requester">token:acme</dd>`) || !strings.Contains(page, bigID) {
		t.Fatalf("approval page: %d\n%s", resp.StatusCode, page)
	}
	// The admin token holds no claims: no approver of the finance rule.
	resp, page = read(c.PostForm(h.Srv.URL+"/console/approvals/"+bigID+"/decide", url.Values{"csrf": {consoleCSRF.FindStringSubmatch(page)[1]}, "action": {"approve"}}))
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(page, `id="decide-error"`) || !strings.Contains(page, `<dd id="approval-state">PENDING</dd>`) {
		t.Fatalf("approve by a non-approver: %d\n%s", resp.StatusCode, page)
	}
	if r := h.Do(big); r.Status != http.StatusConflict || !strings.Contains(string(r.Body), wire.CodeApprovalPending) || tool.Total.Load() != 0 {
		t.Fatalf("after the refused approve: %d %s, %d runs", r.Status, r.Body, tool.Total.Load())
	}

	small := acmeRefund("c", 2, "500")
	smallID := pendingID(t, h.Do(small))
	_, page = read(c.Get(h.Srv.URL + "/console/approvals/" + smallID))
	resp, page = read(c.PostForm(h.Srv.URL+"/console/approvals/"+smallID+"/decide", url.Values{"csrf": {consoleCSRF.FindStringSubmatch(page)[1]}, "action": {"approve"}}))
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/console/approvals/"+smallID || !strings.Contains(page, "You approved this call.") ||
		!strings.Contains(page, "olga (token:admin)") {
		t.Fatalf("approve: %d %s\n%s", resp.StatusCode, resp.Request.URL, page)
	}
	if r := h.Do(small); r.Status != http.StatusOK || tool.Runs(keyOf(t, small)) != 1 {
		t.Fatalf("approved call: %d, ran %d", r.Status, tool.Runs(keyOf(t, small)))
	}
	// The approval that ran stays in the history, CONSUMED, linking its
	// execution; the history filter takes the state.
	resp, page = read(c.Get(h.Srv.URL + "/console/approvals/" + smallID))
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, `<dd id="approval-state">CONSUMED</dd>`) || !strings.Contains(page, "execution ") {
		t.Fatalf("consumed approval's page: %d\n%s", resp.StatusCode, page)
	}
	resp, page = read(c.Get(h.Srv.URL + "/console/approvals?state=consumed"))
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, smallID+"</a></td><td>CONSUMED</td>") || strings.Contains(page, bigID+"</a></td><td>") {
		t.Fatalf("history of CONSUMED: %d\n%s", resp.StatusCode, page)
	}
}

// TestConsoleApprovalPageShowsTheRuleText: the approval's page and its
// pending card show the text of the rule that asked (its when and its
// approvers), not only its index; after a reload changes the tool's
// rules, the page warns that an approval given now is void at use, and
// indeed approving it then runs nothing (approval_stale).
func TestConsoleApprovalPageShowsTheRuleText(t *testing.T) {
	h, tool := trustHarness(t, []decide.Rule{
		{When: "args.amount > 1000", Decision: decide.Approve, Reason: "big refunds", Approvers: decide.Approvers{IDs: []string{"token:admin", "oidc:idp.example:ada"}}},
		{Decision: decide.Allow},
	})
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	read := func(resp *http.Response, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	page := read(c.Get(h.Srv.URL + "/console/signin"))
	read(c.PostForm(h.Srv.URL+"/console/signin", url.Values{"csrf": {consoleCSRF.FindStringSubmatch(page)[1]}, "name": {"olga"}, "token": {adminToken}}))

	call := acmeRefund("rule", 1, "5000")
	id := pendingID(t, h.Do(call))
	wantWhen := `id="rule-when-` + id + `">when: args.amount &gt; 1000</code>`
	wantApprovers := `id="rule-approvers-` + id + `">approvers: token:admin, oidc:idp.example:ada</code>`
	for _, path := range []string{"/console/approvals/" + id, "/console/approvals"} {
		page = read(c.Get(h.Srv.URL + path))
		if !strings.Contains(page, wantWhen) || !strings.Contains(page, wantApprovers) || strings.Contains(page, "rules changed") {
			t.Fatalf("%s lacks the rule's text:\n%s", path, page)
		}
	}

	changed := compileRules(t, "refund", []decide.Rule{{When: "args.amount > 2000", Decision: decide.Approve}, {Decision: decide.Allow}})
	tenants := []callpath.Tenant{{Name: "acme", TokenSHA256: sha256.Sum256([]byte(acmeToken))}}
	admin := sha256.Sum256([]byte(adminToken))
	if err := h.GW.Reload(callpath.Settings{Decisions: changed, Tenants: tenants, AdminTokenSHA256: &admin}); err != nil {
		t.Fatal(err)
	}
	page = read(c.Get(h.Srv.URL + "/console/approvals/" + id))
	// The rule's text now is not the one that asked: only the warning.
	if !strings.Contains(page, "The tool's rules changed since this was asked") || strings.Contains(page, "rule-when-") {
		t.Fatalf("no warning after the rules changed:\n%s", page)
	}
	read(c.PostForm(h.Srv.URL+"/console/approvals/"+id+"/decide", url.Values{"csrf": {consoleCSRF.FindStringSubmatch(page)[1]}, "action": {"approve"}}))
	gatewaytest.WantProblem(t, h.Do(call), http.StatusForbidden, wire.CodeApprovalStale)
	if n := tool.Total.Load(); n != 0 {
		t.Fatalf("the approval given after the warning ran %d times", n)
	}
}
