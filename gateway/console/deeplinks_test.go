package console_test

import (
	"context"
	"crypto/sha256"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/toolgateway/toolgateway/gateway/console"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/receipts"
	"github.com/toolgateway/toolgateway/gateway/receipts/boltreceipts"
)

func TestApprovalDeepLinkOpensTheApproval(t *testing.T) {
	f := newFixture(t)
	c := f.browser(t)
	id := f.pendingApproval(t, "k1", `{"amount":2000}`, "refunds above 1 000 need finance")
	// Signed out, the link goes through sign-in and back to the approval.
	resp, page := f.signIn(t, c, "alice", adminToken, "/console/approvals/"+id)
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/console/approvals/"+id {
		t.Fatalf("deep link: %d %s", resp.StatusCode, resp.Request.URL)
	}
	for _, want := range []string{`<dd class="id" id="approval-id">` + id + `</dd>`, `<dd id="approval-state">PENDING</dd>`, "decide[1]",
		"refunds above 1 000 need finance", "&#34;amount&#34;: 2000", "s-1", `id="decide"`, `data-needs-note="note"`} {
		if !strings.Contains(page, want) {
			t.Errorf("approval page lacks %q", want)
		}
	}
	resp, page = get(t, c, f.srv.URL+"/console/approvals/01JNOSUCHAPPROVAL")
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(page, "No approval with that id") || strings.Contains(page, `id="decide"`) {
		t.Fatalf("unknown approval: %d\n%s", resp.StatusCode, page)
	}
}

func TestDenyNeedsANoteOfAtMost1KiB(t *testing.T) {
	f := newFixture(t)
	c := f.browser(t)
	f.signIn(t, c, "alice", adminToken, "/console/approvals")
	id := f.pendingApproval(t, "k2", `{"amount":2000}`, "big")
	_, page := get(t, c, f.srv.URL+"/console/approvals/"+id)
	csrf := csrfOf(t, page)
	for note, want := range map[string]string{
		"   ":                     "A deny needs a note",
		strings.Repeat("n", 1025): "longer than 1024 bytes",
		"":                        "A deny needs a note",
	} {
		resp, page := post(t, c, f.srv.URL+"/console/approvals/"+id+"/decide", url.Values{"csrf": {csrf}, "action": {"deny"}, "note": {note}})
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, want) || !strings.Contains(page, `id="decide"`) {
			t.Errorf("deny with a %d-byte note: %d, want %q and the form again", len(note), resp.StatusCode, want)
		}
	}
	if rec, _ := f.store.GetApproval(context.Background(), id); rec.State != idempotency.StateAwaitingApproval {
		t.Fatalf("a refused deny changed the approval: %s", rec.State)
	}
	resp, page := post(t, c, f.srv.URL+"/console/approvals/"+id+"/decide", url.Values{"csrf": {csrf}, "action": {"deny"}, "note": {"not now"}})
	if resp.Request.URL.Path != "/console/approvals/"+id || !strings.Contains(page, "You denied this call.") || strings.Contains(page, `id="decide"`) {
		t.Fatalf("deny with a note: %d %s\n%s", resp.StatusCode, resp.Request.URL, page)
	}
	if rec, _ := f.store.GetApproval(context.Background(), id); rec.State != idempotency.StateDenied || rec.Approval.Note != "not now" {
		t.Fatalf("after the deny: %s %+v", rec.State, rec.Approval)
	}
}

var historyRowRE = regexp.MustCompile(`<td class="id"><a href="/console/approvals/([^"]+)">`)

// historyIDs are the approval ids of the history table, in order.
func historyIDs(page string) []string {
	var ids []string
	for _, m := range historyRowRE.FindAllStringSubmatch(page, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

func TestHistoryFiltersAndOrder(t *testing.T) {
	f := newFixture(t)
	c := f.browser(t)
	f.signIn(t, c, "alice", adminToken, "/console/approvals")
	first := f.pendingApproval(t, "k3", `{"amount":1}`, "r")
	f.clock.Add(time.Minute)
	second := f.pendingApproval(t, "k4", `{"amount":2}`, "r")
	f.clock.Add(time.Minute)
	third := f.pendingApproval(t, "k5", `{"amount":3}`, "r")
	if _, err := f.store.DecideApproval(context.Background(), second, idempotency.ApprovalDecision{By: "token:admin", Note: "no"}); err != nil {
		t.Fatal(err)
	}

	_, page := get(t, c, f.srv.URL+"/console/approvals")
	if got := historyIDs(page); strings.Join(got, " ") != strings.Join([]string{third, second, first}, " ") {
		t.Errorf("history, newest first: %v", got)
	}
	_, page = get(t, c, f.srv.URL+"/console/approvals?state=PENDING")
	if got := historyIDs(page); strings.Join(got, " ") != first+" "+third {
		t.Errorf("pending history, oldest first: %v", got)
	}
	_, page = get(t, c, f.srv.URL+"/console/approvals?state=DENIED")
	if got := historyIDs(page); len(got) != 1 || got[0] != second {
		t.Errorf("denied: %v", got)
	}
	since := f.clock.Now().Add(-60 * time.Second).UTC().Format("2006-01-02T15:04")
	_, page = get(t, c, f.srv.URL+"/console/approvals?since="+since+"&session=s-1")
	if got := historyIDs(page); strings.Join(got, " ") != third+" "+second {
		t.Errorf("since %s in session s-1: %v", since, got)
	}
	for q, want := range map[string]string{"tool=lookup": "No approvals match", "session=s-2": "No approvals match", "tenant=globex": "No approvals match"} {
		if _, page = get(t, c, f.srv.URL+"/console/approvals?"+q); !strings.Contains(page, want) {
			t.Errorf("%s: lacks %q", q, want)
		}
	}
	resp, page := get(t, c, f.srv.URL+"/console/approvals?state=BOGUS")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, "is not one of PENDING, APPROVED, DENIED, EXPIRED") {
		t.Errorf("bad state: %d", resp.StatusCode)
	}
}

func TestRecordDeepLink(t *testing.T) {
	f := newFixture(t)
	c := f.browser(t)
	f.signIn(t, c, "alice", adminToken, "/console/uncertain")
	rec := f.unknownRecord(t, "k8", `{"amount":7}`)
	_, list := get(t, c, f.srv.URL+"/console/uncertain")
	link := "/console/records/refund/" + receipts.KeyHash("k8")
	if !strings.Contains(list, `href="`+link+`"`) {
		t.Fatalf("the uncertain list does not link to the record's page %s:\n%s", link, list)
	}
	resp, page := get(t, c, f.srv.URL+link)
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, `<dd id="record-state">UNKNOWN</dd>`) || !strings.Contains(page, `id="resolve"`) ||
		!strings.Contains(page, rec.ExecutionID) || !strings.Contains(page, "&#34;amount&#34;: 7") {
		t.Fatalf("record page: %d\n%s", resp.StatusCode, page)
	}
	if resp, _ := get(t, c, f.srv.URL+"/console/records/refund/"+receipts.KeyHash("nope")); resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown key hash: %d", resp.StatusCode)
	}
	if resp, _ := get(t, c, f.srv.URL+"/console/records/refund/k8"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a key instead of its hash: %d", resp.StatusCode)
	}
}

func TestReceiptsNewestFirstAndDeepLink(t *testing.T) {
	f := newFixture(t)
	db, err := bolt.Open(filepath.Join(t.TempDir(), "receipts.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	rs, err := boltreceipts.New(db, f.clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := rs.Append(context.Background(), "acme", receipts.Receipt{Event: receipts.EventExecuted, Tool: "refund", Key: receipts.KeyHash("k"), ExecutionID: "exec-" + string(rune('a'+i)), Time: f.clock.Now().Add(time.Duration(i) * time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	sum := sha256.Sum256([]byte(adminToken))
	// The chain's verified head lags (2): the page still starts at the
	// newest receipt.
	srv := httptest.NewServer(console.New(receiptsBackend{storeBackend: storeBackend{f.store}, receipts: rs, chains: []console.ChainState{{Tenant: "acme", Head: 2, Receipts: 2, Verified: true}}}, console.Options{
		Authenticate: func(token string) bool { return sha256.Sum256([]byte(token)) == sum },
		SessionKeys:  func() [][]byte { return [][]byte{testSessionKey} },
		Now:          f.clock.Now,
		PageSize:     3,
	}))
	t.Cleanup(srv.Close)
	f.srv = srv
	c := f.browser(t)
	f.signIn(t, c, "alice", adminToken, "/console/receipts")
	seqRE := regexp.MustCompile(`<td><a href="/console/receipts/acme/(\d+)">`)
	seqs := func(page string) (out []string) {
		for _, m := range seqRE.FindAllStringSubmatch(page, -1) {
			out = append(out, m[1])
		}
		return out
	}
	_, page := get(t, c, srv.URL+"/console/receipts?tenant=acme")
	if got := strings.Join(seqs(page), " "); got != "5 4 3" || !strings.Contains(page, `href="/console/receipts?tenant=acme&amp;tool=&amp;event=&amp;since=&amp;until=&amp;before=3"`) {
		t.Fatalf("first page %q, want 5 4 3 and a link to older ones:\n%s", got, page)
	}
	_, page = get(t, c, srv.URL+"/console/receipts?tenant=acme&before=3")
	if got := strings.Join(seqs(page), " "); got != "2 1" || strings.Contains(page, "Older receipts") {
		t.Fatalf("older page %q, want 2 1 and no older link", got)
	}
	resp, page := get(t, c, srv.URL+"/console/receipts/acme/4")
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, "exec-d") || !strings.Contains(page, `href="/console/records/refund/`+receipts.KeyHash("k")+`"`) {
		t.Fatalf("receipt 4: %d\n%s", resp.StatusCode, page)
	}
	for path, status := range map[string]int{"/console/receipts/acme/9": 404, "/console/receipts/globex/1": 404, "/console/receipts/acme/x": 400, "/console/receipts/acme/0": 400, "/console/receipts?tenant=acme&before=-1": 400} {
		if resp, _ := get(t, c, srv.URL+path); resp.StatusCode != status {
			t.Errorf("%s: %d, want %d", path, resp.StatusCode, status)
		}
	}
}

func TestToolsShowEnforcedAndObservedDecisionsApart(t *testing.T) {
	f := newFixture(t)
	c := f.browser(t)
	f.signIn(t, c, "alice", adminToken, "/console/tools")
	_, page := get(t, c, f.srv.URL+"/console/tools")
	if !strings.Contains(page, "<dt>Decisions</dt><dd>approve: 2 </dd>") || !strings.Contains(page, `<dt>Observed</dt><dd class="observed">deny: 4 `) {
		t.Fatalf("tools page mixes or drops the decisions:\n%s", page)
	}
}
