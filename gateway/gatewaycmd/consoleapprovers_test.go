package gatewaycmd

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/toolgateway/toolgateway/internal/oidctest"
)

// TestConsoleOIDCGroupsDecideWithFourEyesAndQuorum: through the real
// program, the provider's people sign in to the console at its login page
// and their ID tokens' groups decide who may approve (`"finance" in
// claims.groups`, quorum 2). Carol (support) asks with her access token:
// her own approve is 403 (four eyes), and hers of Ada's call is 403 (not
// an approver); after Ada's approve the call still waits and the upstream
// ran nothing; after Bob's it runs once. The browser test
// (gateway/console/e2e/console-oidc.test.mjs) does the same in Chromium.
func TestConsoleOIDCGroupsDecideWithFourEyesAndQuorum(t *testing.T) {
	op := oidctest.Start(t, oidcAudience)
	up, runs := countingUpstream(t, 0)
	g := startOIDCConsole(t, op, "gateway-console-groups", "", "        approvers: '\"finance\" in claims.groups'\n        quorum: 2\n", up.URL)
	people := map[string]oidctest.Person{}
	for _, p := range oidctest.People {
		people[p.Subject] = p
	}
	ask := func(who string, step uint64) (string, string) {
		t.Helper()
		token := op.Token(t, oidctest.SubjectScopePrefix+who, oidctest.OrgScopePrefix+"acme")
		r := bearerCall(t, g.addr, token, "groups", step, "refund", `{"amount":2500}`)
		var pending struct {
			ApprovalID string `json:"approval_id"`
		}
		if json.Unmarshal(r.body, &pending) != nil || r.status != http.StatusConflict || pending.ApprovalID == "" {
			t.Fatalf("%s's call: %d %s", who, r.status, r.body)
		}
		return token, pending.ApprovalID
	}
	carolToken, carolsCall := ask("carol", 1)
	_, adasCall := ask("ada", 2)
	browsers := map[string]*http.Client{}
	for _, who := range []string{"carol", "ada", "bob"} {
		browsers[who] = signInAs(t, g.addr, op, people[who].Username, people[who].Password)
	}
	csrfRE := regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	approve := func(who, id string) (int, string) {
		t.Helper()
		page := getPage(t, browsers[who], "http://"+g.addr+"/console/approvals/"+id)
		resp, err := browsers[who].PostForm("http://"+g.addr+"/console/approvals/"+id+"/decide", url.Values{"csrf": {csrfRE.FindStringSubmatch(page)[1]}, "action": {"approve"}})
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(body)
	}
	if status, page := approve("carol", carolsCall); status != http.StatusForbidden || !strings.Contains(page, "The requester of a call cannot decide its approval") {
		t.Fatalf("the requester's own approve: %d\n%s", status, page)
	}
	if status, page := approve("carol", adasCall); status != http.StatusForbidden || !strings.Contains(page, "You are not an approver of this call") {
		t.Fatalf("a support person's approve: %d\n%s", status, page)
	}
	if status, page := approve("ada", carolsCall); status != http.StatusOK || !strings.Contains(page, "1 of 2 approvals") {
		t.Fatalf("ada's approve: %d\n%s", status, page)
	}
	if r := bearerCall(t, g.addr, carolToken, "groups", 1, "refund", `{"amount":2500}`); r.status != http.StatusConflict || runs.Load() != 0 {
		t.Fatalf("after one of two approvals: %d %s, %d runs", r.status, r.body, runs.Load())
	}
	if status, page := approve("bob", carolsCall); status != http.StatusOK || !strings.Contains(page, `<dd id="approval-state">APPROVED</dd>`) {
		t.Fatalf("bob's approve: %d\n%s", status, page)
	}
	for range 2 {
		if r := bearerCall(t, g.addr, carolToken, "groups", 1, "refund", `{"amount":2500}`); r.status != http.StatusOK {
			t.Fatalf("after the quorum: %d %s", r.status, r.body)
		}
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the upstream ran %d times, want 1", n)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+g.addr+"/admin/v1/approvals/"+adasCall, nil)
	req.Header.Set("Authorization", "Bearer admin")
	var ada struct {
		State      string   `json:"state"`
		ApprovedBy []string `json:"approved_by"`
	}
	if r := do(t, req); json.Unmarshal(r.body, &ada) != nil || ada.State != "PENDING" || len(ada.ApprovedBy) != 0 {
		t.Fatalf("ada's call after the refused approve: %d %s", r.status, r.body)
	}
}
