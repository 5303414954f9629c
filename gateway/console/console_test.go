package console_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/console"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/boltstore"
	"github.com/toolgateway/toolgateway/gateway/receipts"
)

const adminToken = "console-test-admin-token"

// clock is a settable test clock shared by the store and the console.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// storeBackend is a console.Backend over a real embedded store. Its
// resolve validation is the smallest that tells JSON from not JSON; the
// gateway's adapter (tested in package gateway) uses the admin API's.
type storeBackend struct {
	*boltstore.Store
}

func (b storeBackend) ListRecords(ctx context.Context, f idempotency.ListFilter) (idempotency.Page, error) {
	return b.List(ctx, f)
}

func (b storeBackend) Resolve(ctx context.Context, scope idempotency.Scope, res console.Resolution) (idempotency.Record, error) {
	if res.ContentType == "application/json" && !json.Valid([]byte(res.Body)) {
		return idempotency.Record{}, fmt.Errorf("%w: the body is not valid JSON", console.ErrInvalidResolution)
	}
	return b.Store.Resolve(ctx, scope, idempotency.StoredResponse{Status: res.Status, ContentType: res.ContentType, Body: []byte(res.Body)}, time.Hour)
}

func (b storeBackend) Receipts(context.Context, receipts.Filter) ([]receipts.Receipt, int64, error) {
	return nil, 0, console.ErrReceiptsOff
}

func (b storeBackend) ReceiptChains(context.Context) ([]console.ChainState, error) {
	return nil, console.ErrReceiptsOff
}

func (b storeBackend) Tools(context.Context) ([]console.ToolStats, error) {
	return []console.ToolStats{{Name: "refund", Policy: []string{"timeout: 30s"}, Executions: 3, Replays: 1, P50: time.Millisecond, P99: 40 * time.Millisecond}}, nil
}

type fixture struct {
	srv   *httptest.Server
	store *boltstore.Store
	clock *clock
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	clk := &clock{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "store.db"), boltstore.Options{SweepInterval: -1, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	sum := sha256.Sum256([]byte(adminToken))
	h := console.New(storeBackend{st}, console.Options{
		Authenticate: func(token string) bool { return sha256.Sum256([]byte(token)) == sum },
		SessionKeys:  func() [][]byte { return [][]byte{console.SessionKey(sum)} },
		SessionTTL:   time.Hour,
		Now:          clk.Now,
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &fixture{srv: srv, store: st, clock: clk}
}

// browser is a client with its own cookies: one browser tab set.
func (f *fixture) browser(t testing.TB) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar}
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func csrfOf(t testing.TB, page string) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token in the page:\n%s", page)
	}
	return m[1]
}

func get(t testing.TB, c *http.Client, u string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func post(t testing.TB, c *http.Client, u string, form url.Values) (*http.Response, string) {
	t.Helper()
	resp, err := c.PostForm(u, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// signIn signs c in as name and returns the page it lands on.
func (f *fixture) signIn(t testing.TB, c *http.Client, name, token, next string) (*http.Response, string) {
	t.Helper()
	_, page := get(t, c, f.srv.URL+"/console/signin?next="+url.QueryEscape(next))
	return post(t, c, f.srv.URL+"/console/signin", url.Values{"csrf": {csrfOf(t, page)}, "name": {name}, "token": {token}, "next": {next}})
}

// pendingApproval writes a pending approval through the store's Claim, as
// the gateway's decide stage does, and returns its id.
func (f *fixture) pendingApproval(t *testing.T, key, args, reason string) string {
	t.Helper()
	id := "01JAPPROVAL" + strings.ToUpper(key)
	d, err := f.store.Claim(context.Background(), idempotency.ClaimRequest{
		Scope: idempotency.Scope{Tenant: "acme", Tool: "refund", Key: key}, Fingerprint: fmt.Sprintf("%064x", len(key)),
		Step: &idempotency.Step{SessionID: "s-1", Index: 3}, ExecutionID: "exec-" + key, Owner: "o", LockTTL: time.Minute, ReplayTTL: time.Hour,
		CanonicalArguments: []byte(args),
		Approval:           &idempotency.ApprovalClaim{ID: id, Rule: 1, Reason: reason, Timeout: time.Hour, UseWithin: time.Hour},
	})
	if err != nil || d.Outcome != idempotency.OutcomeAwaitingApproval {
		t.Fatalf("claim: %v %v", d.Outcome, err)
	}
	return id
}

// unknownRecord writes an UNKNOWN record: claimed by a gateway that died,
// of a lease_expiry: unknown tool, then found by the next call.
func (f *fixture) unknownRecord(t *testing.T, key, args string) idempotency.Record {
	t.Helper()
	req := idempotency.ClaimRequest{
		Scope: idempotency.Scope{Tenant: "acme", Tool: "refund", Key: key}, Fingerprint: strings.Repeat("a", 64),
		ExecutionID: "exec-" + key, Owner: "dead", LockTTL: time.Second, ReplayTTL: time.Hour,
		LeaseExpiry: idempotency.LeaseExpiryUnknown, CanonicalArguments: []byte(args),
	}
	if _, err := f.store.Claim(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	f.clock.Add(2 * time.Second)
	req.Owner, req.ExecutionID = "next", "exec-other"
	d, err := f.store.Claim(context.Background(), req)
	if err != nil || d.Outcome != idempotency.OutcomeUnknown {
		t.Fatalf("second claim: %v %v", d.Outcome, err)
	}
	rec, err := f.store.Get(context.Background(), req.Scope)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func TestSignInWrongTokenStaysWithMessage(t *testing.T) {
	f := newFixture(t)
	c := f.browser(t)
	resp, page := f.signIn(t, c, "alice", "not-the-token", "/console/approvals")
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(page, "not the admin token") {
		t.Fatalf("wrong token: %d\n%s", resp.StatusCode, page)
	}
	if strings.Contains(page, "not-the-token") {
		t.Fatal("the page echoes the submitted token")
	}
	// Still signed out: a console page sends it back to sign-in.
	resp, _ = get(t, c, f.srv.URL+"/console/approvals")
	if !strings.HasSuffix(resp.Request.URL.Path, "/console/signin") {
		t.Fatalf("after a wrong token the console let the browser in: %s", resp.Request.URL)
	}
}

func TestSignInCookieAndReturnToAskedPage(t *testing.T) {
	f := newFixture(t)
	c := f.browser(t)
	resp, _ := get(t, c, f.srv.URL+"/console/uncertain")
	if resp.Request.URL.Path != "/console/signin" || resp.Request.URL.Query().Get("next") != "/console/uncertain" {
		t.Fatalf("signed out, asked for uncertain: landed on %s", resp.Request.URL)
	}
	resp, page := f.signIn(t, c, "alice", adminToken, "/console/uncertain")
	if resp.Request.URL.Path != "/console/uncertain" || !strings.Contains(page, "Signed in as <strong>alice</strong>") {
		t.Fatalf("after sign-in: %s\n%s", resp.Request.URL, page)
	}
	var session *http.Cookie
	for _, ck := range resp.Request.Response.Cookies() {
		if ck.Name == "tg_console" {
			session = ck
		}
	}
	if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode || session.MaxAge != 3600 {
		t.Fatalf("session cookie: %+v", session)
	}
	if strings.Contains(session.Value, adminToken) || strings.Contains(page, adminToken) {
		t.Fatal("the admin token is in the cookie or the page")
	}

	// Expired: back to sign-in, then to the page asked for.
	f.clock.Add(time.Hour + time.Second)
	resp, _ = get(t, c, f.srv.URL+"/console/tools")
	if resp.Request.URL.Path != "/console/signin" || resp.Request.URL.Query().Get("next") != "/console/tools" {
		t.Fatalf("expired session: landed on %s", resp.Request.URL)
	}
	resp, page = f.signIn(t, c, "alice", adminToken, "/console/tools")
	if resp.Request.URL.Path != "/console/tools" || !strings.Contains(page, "refund") {
		t.Fatalf("after signing in again: %s", resp.Request.URL)
	}
}

func TestSignInNextStaysOnConsole(t *testing.T) {
	f := newFixture(t)
	for _, next := range []string{"https://evil.example/", "//evil.example/console/", "/console/signin", "/elsewhere"} {
		resp, _ := f.signIn(t, f.browser(t), "alice", adminToken, next)
		if resp.Request.URL.Host != strings.TrimPrefix(f.srv.URL, "http://") || resp.Request.URL.Path != "/console/approvals" {
			t.Errorf("next=%q: landed on %s", next, resp.Request.URL)
		}
	}
}

func TestApprovalsPendingThenApprove(t *testing.T) {
	f := newFixture(t)
	c := f.browser(t)
	f.signIn(t, c, "alice", adminToken, "/console/approvals")
	id := f.pendingApproval(t, "k1", `{"amount":2000,"txn_id":"t-9"}`, "refunds above 1 000 need finance")

	// The polled fragment shows it (what the page's script swaps in).
	_, frag := get(t, c, f.srv.URL+"/console/approvals/pending")
	for _, want := range []string{id, "refund", "acme", "s-1", "decide[1]", "refunds above 1 000 need finance", "&#34;amount&#34;: 2000"} {
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
	if err != nil || rec.State != idempotency.StateApproved || rec.Approval.DecidedBy != "alice" || rec.Approval.Note != "ok by finance" {
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
	want := "Already approved by alice at " + decided.Approval.DecidedAt.UTC().Format("2006-01-02 15:04:05Z")
	if resp.StatusCode != http.StatusConflict || !strings.Contains(page, want) {
		t.Fatalf("second tab: %d, want %q in:\n%s", resp.StatusCode, want, page)
	}
	rec, _ := f.store.GetApproval(context.Background(), id)
	if rec.State != idempotency.StateApproved || rec.Approval.DecidedBy != "alice" || rec.Approval.Note != "" {
		t.Fatalf("the second decision changed the approval: %+v %+v", rec.State, rec.Approval)
	}
}

func TestPostWithoutCSRFIsRefused(t *testing.T) {
	f := newFixture(t)
	c := f.browser(t)
	f.signIn(t, c, "alice", adminToken, "/console/approvals")
	id := f.pendingApproval(t, "k3", `{"amount":5000}`, "big")
	unknown := f.unknownRecord(t, "k4", `{"amount":1}`)
	for _, tc := range []struct {
		path string
		form url.Values
	}{
		{"/console/approvals/" + id + "/decide", url.Values{"action": {"approve"}}},
		{"/console/approvals/" + id + "/decide", url.Values{"action": {"approve"}, "csrf": {"forged"}}},
		{"/console/uncertain/" + unknown.ExecutionID + "/resolve", url.Values{"outcome": {"not_executed"}}},
		{"/console/signout", url.Values{}},
	} {
		resp, _ := post(t, c, f.srv.URL+tc.path, tc.form)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("POST %s %v: %d, want 403", tc.path, tc.form, resp.StatusCode)
		}
	}
	if rec, _ := f.store.GetApproval(context.Background(), id); rec.State != idempotency.StateAwaitingApproval {
		t.Fatalf("approval changed without CSRF token: %s", rec.State)
	}
	if rec, err := f.store.Get(context.Background(), unknown.Scope); err != nil || rec.State != idempotency.StateUnknown {
		t.Fatalf("record changed without CSRF token: %v %v", rec.State, err)
	}
	// Sign-in itself needs its form's token.
	resp, _ := post(t, f.browser(t), f.srv.URL+"/console/signin", url.Values{"name": {"x"}, "token": {adminToken}})
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("sign-in without its CSRF token: %d", resp.StatusCode)
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

func TestResolveInvalidBodyChangesNothingThenCommitted(t *testing.T) {
	f := newFixture(t)
	c := f.browser(t)
	f.signIn(t, c, "alice", adminToken, "/console/uncertain")
	rec := f.unknownRecord(t, "k8", `{"amount":7}`)
	_, list := get(t, c, f.srv.URL+"/console/uncertain")
	if !strings.Contains(list, rec.ExecutionID) {
		t.Fatalf("uncertain page lacks the UNKNOWN record:\n%s", list)
	}
	_, page := get(t, c, f.srv.URL+"/console/uncertain/"+rec.ExecutionID)
	resolve := f.srv.URL + "/console/uncertain/" + rec.ExecutionID + "/resolve"
	form := url.Values{"csrf": {csrfOf(t, page)}, "outcome": {"committed"}, "status": {"201"}, "content_type": {"application/json"}, "body": {`{"refund": `}}
	resp, page := post(t, c, resolve, form)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, "not valid JSON") || !strings.Contains(page, html.EscapeString(`{"refund": `)) {
		t.Fatalf("invalid body: %d\n%s", resp.StatusCode, page)
	}
	if got, _ := f.store.Get(context.Background(), rec.Scope); got.State != idempotency.StateUnknown {
		t.Fatalf("invalid body changed the record: %s", got.State)
	}
	form.Set("body", `{"refund":"r-1"}`)
	if resp, _ = post(t, c, resolve, form); resp.Request.URL.Path != "/console/uncertain" {
		t.Fatalf("resolve: %d %s", resp.StatusCode, resp.Request.URL)
	}
	got, err := f.store.Get(context.Background(), rec.Scope)
	if err != nil || got.State != idempotency.StateCompleted || got.Response.Status != 201 || string(got.Response.Body) != `{"refund":"r-1"}` || got.ExecutionID != rec.ExecutionID {
		t.Fatalf("after resolve: %+v %v", got, err)
	}
}

func TestResolveNotExecutedRemovesTheRecord(t *testing.T) {
	f := newFixture(t)
	c := f.browser(t)
	f.signIn(t, c, "alice", adminToken, "/console/uncertain")
	rec := f.unknownRecord(t, "k9", `{"amount":7}`)
	_, page := get(t, c, f.srv.URL+"/console/uncertain/"+rec.ExecutionID)
	resp, _ := post(t, c, f.srv.URL+"/console/uncertain/"+rec.ExecutionID+"/resolve", url.Values{"csrf": {csrfOf(t, page)}, "outcome": {"not_executed"}})
	if resp.Request.URL.Path != "/console/uncertain" {
		t.Fatalf("not executed: %d %s", resp.StatusCode, resp.Request.URL)
	}
	if _, err := f.store.Get(context.Background(), rec.Scope); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("record still there: %v", err)
	}
}

func TestPagesRenderAndCarrySecurityHeaders(t *testing.T) {
	f := newFixture(t)
	c := f.browser(t)
	f.signIn(t, c, "alice", adminToken, "/console/approvals")
	for path, want := range map[string]string{
		"/console/receipts": "keeps no receipts",
		"/console/tools":    "timeout: 30s",
		"/console/":         "Pending",
	} {
		resp, page := get(t, c, f.srv.URL+path)
		if resp.StatusCode != http.StatusOK || !strings.Contains(page, want) {
			t.Errorf("%s: %d, lacks %q", path, resp.StatusCode, want)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || resp.Header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s: security headers %v", path, resp.Header)
		}
	}
	resp, js := get(t, c, f.srv.URL+"/console/static/console.js")
	if resp.StatusCode != http.StatusOK || !strings.Contains(js, "setInterval(poll, 1000)") {
		t.Fatalf("console.js: %d", resp.StatusCode)
	}
}
