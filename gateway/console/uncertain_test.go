package console_test

import (
	"context"
	"errors"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/receipts"
)

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
	// It lands on the record's page, which shows the outcome, not an
	// error, and no resolve form.
	resp, page = post(t, c, resolve, form)
	if resp.Request.URL.Path != "/console/records/refund/"+receipts.KeyHash(rec.Scope.Key) || !strings.Contains(page, "Resolved as committed") ||
		!strings.Contains(page, `<dd id="record-state">COMPLETED</dd>`) || !strings.Contains(page, "&#34;refund&#34;: &#34;r-1&#34;") ||
		strings.Contains(page, `id="resolve"`) || strings.Contains(page, `class="error"`) {
		t.Fatalf("resolve: %d %s\n%s", resp.StatusCode, resp.Request.URL, page)
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

// TestUncertainShowsReconciliationAttempts: a record reconciliation asked
// about shows how often and the latest answers (their detail as text).
func TestUncertainShowsReconciliationAttempts(t *testing.T) {
	f := newFixture(t)
	c := f.browser(t)
	f.signIn(t, c, "alice", adminToken, "/console/uncertain")
	rec := f.unknownRecord(t, "k10", `{"amount":7}`)
	ctx := context.Background()
	claimed, err := f.store.ClaimReconcile(ctx, rec.Scope, "replica-a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.RecordReconcileAttempt(ctx, rec.Scope, "replica-a", claimed.FencingToken,
		idempotency.ReconcileAttempt{At: time.Now(), Outcome: "unknown", Detail: "<script>alert(1)</script>"}); err != nil {
		t.Fatal(err)
	}
	if _, list := get(t, c, f.srv.URL+"/console/uncertain"); !strings.Contains(list, "asked 1×, last answer unknown") {
		t.Fatalf("uncertain page lacks the reconciliation:\n%s", list)
	}
	_, page := get(t, c, f.srv.URL+"/console/uncertain/"+rec.ExecutionID)
	if !strings.Contains(page, "asked 1 time(s)") || strings.Contains(page, "<script>alert(1)") || !strings.Contains(page, html.EscapeString("<script>alert(1)</script>")) {
		t.Fatalf("record page: the attempts, their detail as text:\n%s", page)
	}
}

// TestRecordPageShowsIdentity: a record's page says which identity keyed
// its call: a fingerprint with its person and window, as the store kept it.
func TestRecordPageShowsIdentity(t *testing.T) {
	f := newFixture(t)
	c := f.browser(t)
	f.signIn(t, c, "alice", adminToken, "/console/uncertain")
	req := idempotency.ClaimRequest{
		Scope: idempotency.Scope{Tenant: "acme", Tool: "refund", Key: "fp-key"}, Fingerprint: strings.Repeat("a", 64),
		Step: &idempotency.Step{SessionID: "fp:host-user:op.example:ada"}, StepBoundKey: true,
		ExecutionID: "exec-fp", Owner: "gw", LockTTL: time.Minute, ReplayTTL: time.Hour, LeaseExpiry: idempotency.LeaseExpiryUnknown,
		Identity: `{"kind":"fingerprint","principal":"host-user:op.example:ada","window_start":"2026-12-07T00:00:00Z","window":"24h0m0s"}`,
	}
	if d, err := f.store.Claim(context.Background(), req); err != nil || d.Outcome != idempotency.OutcomeClaimed {
		t.Fatalf("claim: %v %v", d.Outcome, err)
	}
	_, page := get(t, c, f.srv.URL+"/console/uncertain/exec-fp")
	if want := `<dd class="who" id="record-identity">fingerprint host-user:op.example:ada (window 24h0m0s from 2026-12-07T00:00:00Z)</dd>`; !strings.Contains(page, want) {
		t.Fatalf("the record page lacks %s:\n%s", want, page)
	}
}
