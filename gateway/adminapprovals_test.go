package gateway_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// pendingApproval is one approval a test requested through the store.
type pendingApproval struct {
	id, tenant, tool, key, session, args string
	step                                 uint64
}

// requestApproval writes a pending approval for the call (tenant, tool,
// session, step, args) the way the call path does: a Claim whose rules say
// approve. args must be canonical (JCS) text.
func requestApproval(t *testing.T, store idempotency.Store, tenant, tool, session string, step uint64, args string, approver idempotency.Approver) pendingApproval {
	t.Helper()
	p := pendingApproval{id: ulid.Make().String(), tenant: tenant, tool: tool, key: derivedKey(t, session, step, tool, args), session: session, args: args, step: step}
	d, err := store.Claim(t.Context(), idempotency.ClaimRequest{
		Scope:       idempotency.Scope{Tenant: tenant, Tool: tool, Key: p.key},
		Fingerprint: fingerprintOf(t, args), Step: &idempotency.Step{SessionID: session, Index: step},
		StepGuard: true, StepBoundKey: true,
		ExecutionID: ulid.Make().String(), Owner: ulid.Make().String(),
		LockTTL: time.Minute, ReplayTTL: time.Hour, CanonicalArguments: []byte(args),
		Approval: &idempotency.ApprovalClaim{ID: p.id, Rule: 1, Reason: "refunds above 1 000 need finance",
			Approver: approver, Timeout: time.Hour, UseWithin: time.Hour},
	})
	if err != nil || d.Outcome != idempotency.OutcomeAwaitingApproval {
		t.Fatalf("claim with approval: %v, %v", d.Outcome, err)
	}
	return p
}

// postJSON sends a POST with body (JSON unless contentType says otherwise).
func (h *harness) postJSON(path, token, contentType, body string) response {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.srv.URL+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		h.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// storedApproval reads approval id straight from the store.
func storedApproval(t *testing.T, store idempotency.Store, id string) idempotency.Record {
	t.Helper()
	rec, err := store.(idempotency.Approvals).GetApproval(context.Background(), id)
	if err != nil {
		t.Fatalf("GetApproval(%s): %v", id, err)
	}
	return rec
}

// listApprovalIDs follows every page of GET /admin/v1/approvals?query and
// returns the ids in the order listed, checking each page is oldest first.
func listApprovalIDs(t *testing.T, h *harness, query url.Values) []string {
	t.Helper()
	var ids []string
	for pages := 0; ; pages++ {
		if pages > 100 {
			t.Fatalf("listing %v did not end", query)
		}
		r := h.get("/admin/v1/approvals?"+query.Encode(), "tok-admin")
		if r.status != 200 {
			t.Fatalf("list approvals %v: %d %s", query, r.status, r.body)
		}
		page := mustJSON(t, r.body)
		last := ""
		for _, item := range page["approvals"].([]any) {
			a := item.(map[string]any)
			if _, has := a["canonical_arguments"]; has {
				t.Fatalf("a listed approval carries its arguments: %v", a)
			}
			if at := a["requested_at"].(string); at < last {
				t.Fatalf("page not oldest first: %s after %s", at, last)
			} else {
				last = at
			}
			ids = append(ids, a["id"].(string))
		}
		cursor, _ := page["next_cursor"].(string)
		if cursor == "" {
			return ids
		}
		query.Set("cursor", cursor)
	}
}

// sameIDs reports whether got holds exactly the ids of want, once each.
func sameIDs(got []string, want ...pendingApproval) bool {
	if len(got) != len(want) {
		return false
	}
	seen := map[string]bool{}
	for _, id := range got {
		seen[id] = true
	}
	for _, p := range want {
		if !seen[p.id] {
			return false
		}
	}
	return len(seen) == len(want)
}

// TestAdminApprovalsListAndShow: listing filters by state, tenant and tool
// and pages through cursors; one approval shows everything an approver
// needs (the call, its arguments, the rule, the times, who asked).
func TestAdminApprovalsListAndShow(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		h := newHarness(t, kind, []tools.Tool{newTestTool("refund"), newTestTool("pay")}, withTenants(twoTenants), withAdmin("tok-admin"))
		a1 := requestApproval(t, h.store, "acme", "refund", "s1", 1, `{"amount":2000}`, idempotency.ApproverOperator)
		a2 := requestApproval(t, h.store, "acme", "pay", "s1", 2, `{"amount":3000}`, idempotency.ApproverOperator)
		a3 := requestApproval(t, h.store, "globex", "refund", "s9", 1, `{"amount":4000}`, idempotency.ApproverCaller)
		h.do(callSpec{tool: "pay", session: "s2", step: 1, args: `{"amount":5}`, token: "tok-acme"}) // an ordinary record: never listed

		for query, want := range map[string][]pendingApproval{
			"":                          {a1, a2, a3},
			"state=PENDING":             {a1, a2, a3},
			"state=APPROVED":            nil,
			"tenant=acme":               {a1, a2},
			"tool=refund":               {a1, a3},
			"tenant=globex&tool=refund": {a3},
			"limit=1":                   {a1, a2, a3},
		} {
			q, _ := url.ParseQuery(query)
			if got := listApprovalIDs(t, h, q); !sameIDs(got, want...) {
				t.Errorf("?%s lists %v, want %d approvals", query, got, len(want))
			}
		}
		for _, bad := range []string{"state=AWAITING_APPROVAL", "state=pending", "limit=0", "limit=1001", "tenant=AC%3AME", "since=yesterday", "requester=alice", "state=PENDING&state=DENIED", "cursor=bogus"} {
			wantProblem(t, h.get("/admin/v1/approvals?"+bad, "tok-admin"), 400, wire.CodeInvalidAdminRequest)
		}

		r := h.get("/admin/v1/approvals/"+a1.id, "tok-admin")
		if r.status != 200 {
			t.Fatalf("show approval: %d %s", r.status, r.body)
		}
		got := mustJSON(t, r.body)
		want := map[string]any{"id": a1.id, "state": "PENDING", "tenant": "acme", "tool": "refund", "key": a1.key,
			"session_id": "s1", "step_index": 1.0, "canonical_arguments": `{"amount":2000}`, "fingerprint": fingerprintOf(t, a1.args),
			"rule": 1.0, "reason": "refunds above 1 000 need finance", "approver": "operator"}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("approval %s = %v, want %v", k, got[k], v)
			}
		}
		requested, err1 := time.Parse(time.RFC3339, got["requested_at"].(string))
		expires, err2 := time.Parse(time.RFC3339, got["expires_at"].(string))
		if err1 != nil || err2 != nil || expires.Sub(requested) < 59*time.Minute || expires.Sub(requested) > 61*time.Minute {
			t.Errorf("requested_at %v, expires_at %v: want an hour apart", got["requested_at"], got["expires_at"])
		}
		for _, k := range []string{"decided_by", "decided_at", "note"} {
			if _, has := got[k]; has {
				t.Errorf("a pending approval shows %s", k)
			}
		}
		wantProblem(t, h.get("/admin/v1/approvals/"+ulid.Make().String(), "tok-admin"), 404, wire.CodeRecordNotFound)
		wantProblem(t, h.get("/admin/v1/approvals/a%20b", "tok-admin"), 404, wire.CodeRecordNotFound)
		wantProblem(t, h.get("/admin/v1/approvals/"+a1.id+"?x=1", "tok-admin"), 400, wire.CodeInvalidAdminRequest)
		for _, tok := range []string{"tok-acme", "", "tok-admin2"} {
			wantProblem(t, h.get("/admin/v1/approvals", tok), 401, wire.CodeUnauthorized)
			wantProblem(t, h.get("/admin/v1/approvals/"+a1.id, tok), 401, wire.CodeUnauthorized)
		}
	})
}

// TestAdminApprovalsDecide: approve and deny reach the store with by and
// note; deciding again is 409 approval_not_pending naming the first
// decision; bad bodies and tenant tokens change nothing.
func TestAdminApprovalsDecide(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		h := newHarness(t, kind, []tools.Tool{newTestTool("refund")}, withTenants(twoTenants), withAdmin("tok-admin"))
		yes := requestApproval(t, h.store, "acme", "refund", "s1", 1, `{"amount":2000}`, idempotency.ApproverOperator)
		no := requestApproval(t, h.store, "acme", "refund", "s1", 2, `{"amount":9000}`, idempotency.ApproverOperator)
		approve := "/admin/v1/approvals/" + yes.id + "/approve"

		// Refused before anything is decided.
		for _, bad := range []struct {
			token, contentType, body string
			status                   int
			code                     string
		}{
			{"tok-acme", "application/json", `{"by":"mallory"}`, 401, wire.CodeUnauthorized},
			{"", "application/json", `{"by":"mallory"}`, 401, wire.CodeUnauthorized},
			{"tok-admin", "application/json", `{"note":"no one"}`, 400, wire.CodeInvalidAdminRequest},
			{"tok-admin", "application/json", `{"by":"  "}`, 400, wire.CodeInvalidAdminRequest},
			{"tok-admin", "application/json", `{"by":"al\u0007ice"}`, 400, wire.CodeInvalidAdminRequest},
			{"tok-admin", "application/json", `{"by":"alice","note":"` + strings.Repeat("n", 1025) + `"}`, 400, wire.CodeInvalidAdminRequest},
			{"tok-admin", "application/json", `{"by":"alice","extra":1}`, 400, wire.CodeInvalidJSON},
			{"tok-admin", "application/json", `{"by":"alice"`, 400, wire.CodeInvalidJSON},
			{"tok-admin", "application/json", ``, 400, wire.CodeInvalidJSON},
			{"tok-admin", "application/json", `{"by":"alice"} {}`, 400, wire.CodeInvalidJSON},
			{"tok-admin", "text/plain", `{"by":"alice"}`, 415, wire.CodeUnsupportedMediaType},
			{"tok-admin", "application/json", `{"by":"alice","note":"` + strings.Repeat("n", 9000) + `"}`, 413, wire.CodePayloadTooLarge},
		} {
			wantProblem(t, h.postJSON(approve, bad.token, bad.contentType, bad.body), bad.status, bad.code)
		}
		if rec := storedApproval(t, h.store, yes.id); rec.State != idempotency.StateAwaitingApproval {
			t.Fatalf("a refused decision changed the approval: %s", rec.State)
		}

		r := h.postJSON(approve, "tok-admin", "application/json", `{"by":"alice","note":"finance said yes"}`)
		if r.status != 200 {
			t.Fatalf("approve: %d %s", r.status, r.body)
		}
		if got := mustJSON(t, r.body); got["state"] != "APPROVED" || got["decided_by"] != "token:admin" || got["claimed_by"] != "alice" || got["note"] != "finance said yes" || got["decided_at"] == nil {
			t.Fatalf("approved approval %v", got)
		}
		rec := storedApproval(t, h.store, yes.id)
		if rec.State != idempotency.StateApproved || rec.Approval.DecidedBy != "token:admin" || rec.Approval.ClaimedBy != "alice" || rec.Approval.Note != "finance said yes" {
			t.Fatalf("the store says %s by %q note %q", rec.State, rec.Approval.DecidedBy, rec.Approval.Note)
		}

		p := wantProblem(t, h.postJSON(approve, "tok-admin", "application/json", `{"by":"bob"}`), 409, wire.CodeApprovalNotPending)
		if p["state"] != "APPROVED" || p["decided_by"] != "token:admin" || p["decided_at"] != rec.Approval.DecidedAt.UTC().Format(time.RFC3339) || p["retryable"] != false {
			t.Fatalf("second approve: %v", p)
		}
		wantProblem(t, h.postJSON("/admin/v1/approvals/"+yes.id+"/deny", "tok-admin", "application/json", `{"by":"bob","note":"no"}`), 409, wire.CodeApprovalNotPending)

		r = h.postJSON("/admin/v1/approvals/"+no.id+"/deny", "tok-admin", "application/json", `{"by":"carol","note":"too much"}`)
		if r.status != 200 || mustJSON(t, r.body)["state"] != "DENIED" {
			t.Fatalf("deny: %d %s", r.status, r.body)
		}
		if rec := storedApproval(t, h.store, no.id); rec.State != idempotency.StateDenied || rec.Approval.DecidedBy != "token:admin" || rec.Approval.ClaimedBy != "carol" || rec.Approval.Note != "too much" {
			t.Fatalf("the store says %s by %q note %q", rec.State, rec.Approval.DecidedBy, rec.Approval.Note)
		}
		p = wantProblem(t, h.postJSON("/admin/v1/approvals/"+no.id+"/approve", "tok-admin", "application/json", `{"by":"dave"}`), 409, wire.CodeApprovalNotPending)
		if p["state"] != "DENIED" || p["decided_by"] != "token:admin" {
			t.Fatalf("approve after deny: %v", p)
		}
		for state, want := range map[string]pendingApproval{"APPROVED": yes, "DENIED": no} {
			if got := listApprovalIDs(t, h, url.Values{"state": {state}}); !sameIDs(got, want) {
				t.Errorf("state=%s lists %v", state, got)
			}
		}
		wantProblem(t, h.postJSON("/admin/v1/approvals/"+ulid.Make().String()+"/approve", "tok-admin", "application/json", `{"by":"alice"}`), 404, wire.CodeRecordNotFound)
		wantProblem(t, h.get(approve, "tok-admin"), 405, wire.CodeMethodNotAllowed)
	})
}

// TestAdminApprovalsConcurrentApproves: of 8 operators approving one
// approval at once, exactly one succeeds; the others learn who did.
func TestAdminApprovalsConcurrentApproves(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		h := newHarness(t, kind, []tools.Tool{newTestTool("refund")}, withAdmin("tok-admin"))
		a := requestApproval(t, h.store, "anonymous", "refund", "s1", 1, `{"amount":2000}`, idempotency.ApproverOperator)
		const n = 8
		results := make([]response, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				results[i] = h.postJSON("/admin/v1/approvals/"+a.id+"/approve", "tok-admin", "application/json", `{"by":"op`+string(rune('0'+i))+`"}`)
			})
		}
		wg.Wait()
		winner := ""
		for i, r := range results {
			switch r.status {
			case 200:
				if winner != "" {
					t.Fatalf("two approves succeeded: %s and op%d", winner, i)
				}
				winner, _ = mustJSON(t, r.body)["claimed_by"].(string)
				winner += "#" + strconv.Itoa(i)
			case 409:
			default:
				t.Fatalf("approve %d: %d %s", i, r.status, r.body)
			}
		}
		if winner == "" {
			t.Fatal("no approve succeeded")
		}
		winner, _, _ = strings.Cut(winner, "#")
		for _, r := range results {
			if r.status == 409 {
				if p := wantProblem(t, r, 409, wire.CodeApprovalNotPending); p["decided_by"] != "token:admin" {
					t.Fatalf("a losing approve names %v, the winner is %s", p["decided_by"], winner)
				}
			}
		}
		if rec := storedApproval(t, h.store, a.id); rec.Approval.ClaimedBy != winner || rec.Approval.DecidedBy != "token:admin" {
			t.Fatalf("the store says approved by %q, the API %q", rec.Approval.ClaimedBy, winner)
		}
	})
}

// TestCallerApprovals: a tenant decides its own approver: caller
// approvals with its own token, and nothing else.
func TestCallerApprovals(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		h := newHarness(t, kind, []tools.Tool{newTestTool("refund")}, withTenants(twoTenants), withAdmin("tok-admin"))
		mine := requestApproval(t, h.store, "acme", "refund", "s1", 1, `{"amount":2000}`, idempotency.ApproverCaller)
		mineToo := requestApproval(t, h.store, "acme", "refund", "s1", 2, `{"amount":2500}`, idempotency.ApproverCaller)
		operators := requestApproval(t, h.store, "acme", "refund", "s1", 3, `{"amount":3000}`, idempotency.ApproverOperator)
		theirs := requestApproval(t, h.store, "globex", "refund", "s1", 1, `{"amount":2000}`, idempotency.ApproverCaller)
		path := func(a pendingApproval, decision string) string {
			return "/api/tools/v1/approvals/" + a.id + "/" + decision
		}

		wantProblem(t, h.postJSON(path(theirs, "approve"), "tok-acme", "", ""), 403, wire.CodeApprovalNotYours)
		wantProblem(t, h.postJSON(path(operators, "approve"), "tok-acme", "", ""), 403, wire.CodeApprovalNotYours)
		wantProblem(t, h.postJSON(path(mine, "approve"), "tok-admin", "", ""), 401, wire.CodeUnauthorized)
		wantProblem(t, h.postJSON(path(mine, "approve"), "", "", ""), 401, wire.CodeUnauthorized)
		wantProblem(t, h.postJSON(path(mine, "approve"), "tok-acme", "application/json", `{"by":"acme"}`), 400, wire.CodeInvalidJSON)
		wantProblem(t, h.postJSON(path(mine, "approve"), "tok-acme", "application/json", `{"note":"`+strings.Repeat("n", 1025)+`"}`), 400, wire.CodeInvalidJSON)
		wantProblem(t, h.postJSON(path(mine, "approve"), "tok-acme", "text/plain", `{}`), 415, wire.CodeUnsupportedMediaType)
		wantProblem(t, h.postJSON(path(mine, "maybe"), "tok-acme", "", ""), 404, wire.CodeNotFound)
		r := h.get(path(mine, "approve"), "tok-acme")
		if wantProblem(t, r, 405, wire.CodeMethodNotAllowed); r.header.Get("Allow") != "POST" {
			t.Fatalf("Allow = %q, want POST", r.header.Get("Allow"))
		}
		wantProblem(t, h.postJSON("/api/tools/v1/approvals/"+ulid.Make().String()+"/approve", "tok-acme", "", ""), 404, wire.CodeRecordNotFound)
		for _, a := range []pendingApproval{mine, mineToo, operators, theirs} {
			if rec := storedApproval(t, h.store, a.id); rec.State != idempotency.StateAwaitingApproval {
				t.Fatalf("a refused decision changed %s/%d: %s", a.tenant, a.step, rec.State)
			}
		}

		// A static tenant token is an agent's, not a person's: it decides
		// no approver: caller approval (a provider token does,
		// TestCallerApprovalByAPersonRunsOnce).
		wantProblem(t, h.postJSON(path(mine, "approve"), "tok-acme", "", ""), 403, wire.CodeNotAnApprover)
		wantProblem(t, h.postJSON(path(mineToo, "deny"), "tok-acme", "application/json", `{"note":"not today"}`), 403, wire.CodeNotAnApprover)
		for _, a := range []pendingApproval{mine, mineToo} {
			if rec := storedApproval(t, h.store, a.id); rec.State != idempotency.StateAwaitingApproval {
				t.Fatalf("an agent token decided %s/%d: %s", a.tenant, a.step, rec.State)
			}
		}
		// The tenant's token decided nothing of the others'.
		for _, a := range []pendingApproval{operators, theirs} {
			if rec := storedApproval(t, h.store, a.id); rec.State != idempotency.StateAwaitingApproval {
				t.Fatalf("%s/%d: %s", a.tenant, a.step, rec.State)
			}
		}
	})
}
