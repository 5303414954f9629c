package console_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
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
	"github.com/toolgateway/toolgateway/gateway/pins"
	"github.com/toolgateway/toolgateway/gateway/receipts"
)

const adminToken = "console-test-admin-token"

// testSessionKey signs the fixtures' sessions: random, as a configured
// session key file holds one.
var testSessionKey = console.NewSessionKey()

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

// FindRecord scans the tool's records for the key's hash, as the
// gateway's adapter does.
func (b storeBackend) FindRecord(ctx context.Context, tool, keyHash string) (idempotency.Record, error) {
	page, err := b.List(ctx, idempotency.ListFilter{Tool: tool, Limit: idempotency.MaxListLimit})
	if err != nil {
		return idempotency.Record{}, err
	}
	for _, rec := range page.Records {
		if receipts.KeyHash(rec.Scope.Key) == keyHash {
			return b.Get(ctx, rec.Scope)
		}
	}
	return idempotency.Record{}, idempotency.ErrNotFound
}

func (b storeBackend) ListRecords(ctx context.Context, f idempotency.ListFilter) (idempotency.Page, error) {
	return b.List(ctx, f)
}

// Delete removes the record, as the embedded store's Delete does (the
// test backend keeps no receipts).
func (b storeBackend) Delete(ctx context.Context, rec idempotency.Record, _ string) error {
	return b.Store.Delete(ctx, rec.Scope)
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
	return []console.ToolStats{{Name: "refund", Policy: []string{"timeout: 30s"}, Executions: 3, Replays: 1, P50: time.Millisecond, P99: 40 * time.Millisecond,
		Decisions: map[string]float64{"approve": 2}, Observed: map[string]float64{"deny": 4}}}, nil
}

// ApprovalRule finds no rule: the test backend has no configured tools
// (the gateway's adapter is tested in package gateway).
func (b storeBackend) ApprovalRule(string, int, string) console.ApprovalRule {
	return console.ApprovalRule{}
}

// ToolChange: the test backend fronts no MCP server, so pins no tool.
func (b storeBackend) ToolChange(context.Context, string) (pins.Change, error) {
	return pins.Change{}, pins.ErrUnknownTool
}

func (b storeBackend) AcceptTool(context.Context, string, string, string) (pins.Status, error) {
	return pins.Status{}, pins.ErrUnknownTool
}

type fixture struct {
	srv   *httptest.Server
	store *boltstore.Store
	clock *clock
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	return newFixtureWith(t, nil)
}

// newFixtureWith is newFixture with console options changed by edit
// (before the server starts, with its URL).
func newFixtureWith(t testing.TB, edit func(o *console.Options, url string)) *fixture {
	t.Helper()
	clk := &clock{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "store.db"), boltstore.Options{SweepInterval: -1, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	sum := sha256.Sum256([]byte(adminToken))
	opts := console.Options{
		Authenticate: func(token string) bool { return sha256.Sum256([]byte(token)) == sum },
		SessionKeys:  func() [][]byte { return [][]byte{testSessionKey} },
		SessionTTL:   time.Hour,
		Now:          clk.Now,
	}
	srv := httptest.NewUnstartedServer(nil)
	if edit != nil {
		edit(&opts, "http://"+srv.Listener.Addr().String())
	}
	srv.Config.Handler = console.New(storeBackend{st}, opts)
	srv.Start()
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
