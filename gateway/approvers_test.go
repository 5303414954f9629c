package gateway_test

// Trusted approvals (contract section 19), four eyes, quorum and stale
// approvals on every store (each keeps principals): the requester recorded on the approval and its
// receipts, the admin token deciding as token:admin with the typed name
// as claimed_by, four eyes, approvers, quorum of distinct principals
// (racing deciders leave one final state), an approval voided by a
// reload, approver: caller refused to a static token. Executions are
// counted at the tool.

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/decide"
	"github.com/toolgateway/toolgateway/gateway/gatewaytest"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/oidcauth"
	"github.com/toolgateway/toolgateway/gateway/principal"
	"github.com/toolgateway/toolgateway/internal/oidctest"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

const (
	acmeToken  = "tok-acme-approvals"
	adminToken = "tok-admin-approvals"
)

// trustHarness serves a counting "refund" tool under rules, with tenant
// acme and an admin token, on the embedded store.
func trustHarness(t *testing.T, rules []decide.Rule) (*gatewaytest.Harness, *gatewaytest.Tool) {
	t.Helper()
	return trustHarnessOn(t, gatewaytest.Embedded, rules)
}

// trustHarnessOn is trustHarness on the store kind.
func trustHarnessOn(t *testing.T, kind storeKind, rules []decide.Rule) (*gatewaytest.Harness, *gatewaytest.Tool) {
	t.Helper()
	tool := gatewaytest.NewTool("refund")
	h := gatewaytest.New(t, kind, []tools.Tool{tool},
		withDecisions(compileRules(t, "refund", rules), decide.ModeEnforce, callpath.ApprovalSettings{}),
		gatewaytest.WithTenants(map[string]string{"acme": acmeToken}), withAdmin(adminToken))
	return h, tool
}

// person is a provider-signed-in principal with groups.
func person(t *testing.T, sub string, groups ...any) principal.Principal {
	t.Helper()
	p, err := principal.OIDC("https://idp.example", sub, sub, map[string]any{"groups": groups})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// refusedCode is the code of a decision the engine refused ("" if none).
func refusedCode(err error) string {
	var refused *callpath.DecisionRefused
	if errors.As(err, &refused) {
		return refused.Problem.Code
	}
	return ""
}

func acmeRefund(session string, step uint64, amount string) gatewaytest.Call {
	c := refund(session, step, amount)
	c.Token = acmeToken
	return c
}

func TestApprovalNamesRequesterAndAdminDecidesAsTokenAdmin(t *testing.T) {
	h, tool := trustHarness(t, []decide.Rule{{Decision: decide.Approve, Reason: "refunds need finance"}})
	c := acmeRefund("p", 1, "500")
	id := pendingID(t, h.Do(c))
	got := gatewaytest.MustJSON(t, h.Send(http.MethodGet, "/admin/v1/approvals/"+id, adminToken).Body)
	if got["requester"] != "token:acme" || got["quorum"] != float64(1) {
		t.Fatalf("approval: requester %v quorum %v, want token:acme and 1", got["requester"], got["quorum"])
	}
	// A deny without a note, and a note over 1 KiB: 400, nothing decided.
	r := postAdmin(t, h, "/admin/v1/approvals/"+id+"/deny", `{"by":"Ada"}`)
	gatewaytest.WantProblem(t, r, http.StatusBadRequest, wire.CodeInvalidAdminRequest)
	long, _ := json.Marshal(map[string]string{"by": "Ada", "note": string(make([]byte, 1025))})
	gatewaytest.WantProblem(t, postAdmin(t, h, "/admin/v1/approvals/"+id+"/approve", string(long)), http.StatusBadRequest, wire.CodeInvalidAdminRequest)
	if rec := storedApproval(t, h.Store, id); rec.State != idempotency.StateAwaitingApproval {
		t.Fatalf("state after refused decisions: %s", rec.State)
	}

	r = postAdmin(t, h, "/admin/v1/approvals/"+id+"/approve", `{"by":"Ada Lovelace"}`)
	decided := gatewaytest.MustJSON(t, r.Body)
	if r.Status != http.StatusOK || decided["decided_by"] != "token:admin" || decided["claimed_by"] != "Ada Lovelace" {
		t.Fatalf("admin decision: %d decided_by %v claimed_by %v", r.Status, decided["decided_by"], decided["claimed_by"])
	}
	if r := h.Do(c); r.Status != http.StatusOK {
		t.Fatalf("approved call: %d %s", r.Status, r.Body)
	}
	if n := tool.Runs(keyOf(t, c)); n != 1 {
		t.Fatalf("ran %d times, want 1", n)
	}
}

// postAdmin posts a JSON decision with the admin token.
func postAdmin(t *testing.T, h *gatewaytest.Harness, path, body string) gatewaytest.Response {
	t.Helper()
	return postWith(t, h, path, adminToken, body)
}

// postWith posts a JSON body (none when "") with token.
func postWith(t *testing.T, h *gatewaytest.Harness, path, token, body string) gatewaytest.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.Srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := h.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return gatewaytest.Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

func TestFourEyesAndApprovers(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		ctx := context.Background()
		h, tool := trustHarnessOn(t, kind, []decide.Rule{
			{When: "args.amount > 1000", Decision: decide.Approve, Approvers: decide.Approvers{Expr: `"finance" in claims.groups`}},
			{Decision: decide.Approve},
		})
		// Four eyes: the requester cannot decide their own call.
		small := acmeRefund("f", 1, "500")
		id := pendingID(t, h.Do(small))
		_, err := h.GW.DecideApproval(ctx, id, callpath.ApprovalDecision{Approve: true, Decider: principal.Token("acme")})
		var refused *callpath.DecisionRefused
		if refusedCode(err) != wire.CodeSelfApproval || !errors.As(err, &refused) || refused.Problem.Status != http.StatusForbidden {
			t.Fatalf("requester's own approve: %v, want 403 self_approval", err)
		}
		if rec := storedApproval(t, h.Store, id); rec.State != idempotency.StateAwaitingApproval || len(rec.Approval.ApprovedBy) != 0 {
			t.Fatalf("after the requester's own approve: %s approved by %v, want untouched", rec.State, rec.Approval.ApprovedBy)
		}
		// Approvers: a person outside finance, and the admin token (no
		// claims), are no approvers; finance is.
		big := acmeRefund("f", 2, "5000")
		bigID := pendingID(t, h.Do(big))
		for _, d := range []principal.Principal{person(t, "eve", "sales"), principal.Admin} {
			if _, err := h.GW.DecideApproval(ctx, bigID, callpath.ApprovalDecision{Approve: true, Decider: d}); refusedCode(err) != wire.CodeNotAnApprover {
				t.Fatalf("approve by %s: %v, want not_an_approver", d.ID, err)
			}
		}
		gatewaytest.WantProblem(t, h.Do(big), http.StatusConflict, wire.CodeApprovalPending)
		if n := tool.Total.Load(); n != 0 {
			t.Fatalf("refused decisions let %d calls run", n)
		}
		if _, err := h.GW.DecideApproval(ctx, bigID, callpath.ApprovalDecision{Approve: true, Decider: person(t, "ada", "finance")}); err != nil {
			t.Fatal(err)
		}
		if r := h.Do(big); r.Status != http.StatusOK || tool.Runs(keyOf(t, big)) != 1 {
			t.Fatalf("approved by finance: %d, ran %d", r.Status, tool.Runs(keyOf(t, big)))
		}
	})
}

func TestQuorumNeedsDistinctPrincipals(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		ctx := context.Background()
		h, tool := trustHarnessOn(t, kind, []decide.Rule{{Decision: decide.Approve, Quorum: 2}})
		c := acmeRefund("q", 1, "700")
		id := pendingID(t, h.Do(c))
		ada, bob := person(t, "ada"), person(t, "bob")
		for range 2 { // ada twice counts once
			rec, err := h.GW.DecideApproval(ctx, id, callpath.ApprovalDecision{Approve: true, Decider: ada})
			if err != nil || rec.State != idempotency.StateAwaitingApproval || !slices.Equal(rec.Approval.ApprovedBy, []string{ada.ID}) {
				t.Fatalf("ada's approve: %v %v %v", rec.State, rec.Approval, err)
			}
		}
		gatewaytest.WantProblem(t, h.Do(c), http.StatusConflict, wire.CodeApprovalPending)
		listed := gatewaytest.MustJSON(t, h.Send(http.MethodGet, "/admin/v1/approvals/"+id, adminToken).Body)
		if by, _ := listed["approved_by"].([]any); len(by) != 1 || by[0] != ada.ID {
			t.Fatalf("approved_by = %v, want [%s]", listed["approved_by"], ada.ID)
		}
		rec, err := h.GW.DecideApproval(ctx, id, callpath.ApprovalDecision{Approve: true, Decider: bob})
		if err != nil || rec.State != idempotency.StateApproved {
			t.Fatalf("bob's approve: %v %v", rec.State, err)
		}
		if r := h.Do(c); r.Status != http.StatusOK || tool.Runs(keyOf(t, c)) != 1 {
			t.Fatalf("quorum reached: %d, ran %d", r.Status, tool.Runs(keyOf(t, c)))
		}
		// The approval that ran stays as history: CONSUMED, with its
		// approvers, shown, listed and refused to a late decider.
		shown := gatewaytest.MustJSON(t, h.Send(http.MethodGet, "/admin/v1/approvals/"+id, adminToken).Body)
		if by, _ := shown["approved_by"].([]any); shown["state"] != "CONSUMED" || len(by) != 2 || shown["decided_by"] != bob.ID {
			t.Fatalf("approval after the run: %v", shown)
		}
		listed = gatewaytest.MustJSON(t, h.Send(http.MethodGet, "/admin/v1/approvals?state=CONSUMED", adminToken).Body)
		if items, _ := listed["approvals"].([]any); len(items) != 1 || items[0].(map[string]any)["id"] != id {
			t.Fatalf("?state=CONSUMED lists %v, want %s", listed["approvals"], id)
		}
		late := postAdmin(t, h, "/admin/v1/approvals/"+id+"/approve", `{"by":"Carl"}`)
		gatewaytest.WantProblem(t, late, http.StatusConflict, wire.CodeApprovalNotPending)
		if r := h.Do(c); r.Status != http.StatusOK || tool.Runs(keyOf(t, c)) != 1 {
			t.Fatalf("replay after a late decision: %d, ran %d", r.Status, tool.Runs(keyOf(t, c)))
		}
	})
}

func TestRacingQuorumDecisionsLeaveOneFinalState(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		ctx := context.Background()
		h, tool := trustHarnessOn(t, kind, []decide.Rule{{Decision: decide.Approve, Quorum: 2}})
		for round := range 20 {
			c := acmeRefund("race", uint64(round), "700")
			id := pendingID(t, h.Do(c))
			deciders := []callpath.ApprovalDecision{
				{Approve: true, Decider: person(t, "ada")},
				{Approve: true, Decider: person(t, "bob")},
				{Approve: false, Decider: person(t, "carl"), Note: "not this one"},
			}
			finals := make(chan idempotency.State, len(deciders))
			var wg sync.WaitGroup
			for _, d := range deciders {
				wg.Go(func() {
					rec, err := h.GW.DecideApproval(ctx, id, d)
					if err == nil && rec.State != idempotency.StateAwaitingApproval {
						finals <- rec.State
					}
				})
			}
			wg.Wait()
			close(finals)
			var got []idempotency.State
			for s := range finals {
				got = append(got, s)
			}
			stored := storedApproval(t, h.Store, id).State
			if len(got) != 1 || got[0] != stored {
				t.Fatalf("round %d: final decisions %v, stored %s: want exactly one, the stored one", round, got, stored)
			}
			r := h.Do(c)
			if ran := tool.Runs(keyOf(t, c)); (stored == idempotency.StateApproved) != (ran == 1) || ran > 1 {
				t.Fatalf("round %d: stored %s, call %d, ran %d", round, stored, r.Status, ran)
			}
		}
	})
}

func TestReloadVoidsAnApproval(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		h, tool := trustHarnessOn(t, kind, []decide.Rule{{Decision: decide.Approve, Reason: "refunds need finance"}})
		c := acmeRefund("stale", 1, "800")
		id := pendingID(t, h.Do(c))
		if _, err := h.GW.DecideApproval(context.Background(), id, callpath.ApprovalDecision{Approve: true, Decider: principal.Admin, ClaimedBy: "Ada"}); err != nil {
			t.Fatal(err)
		}
		changed := compileRules(t, "refund", []decide.Rule{{Decision: decide.Approve, Reason: "refunds need two of finance"}})
		tenants := []callpath.Tenant{{Name: "acme", TokenSHA256: sha256.Sum256([]byte(acmeToken))}}
		admin := sha256.Sum256([]byte(adminToken))
		if err := h.GW.Reload(callpath.Settings{Decisions: changed, Tenants: tenants, AdminTokenSHA256: &admin}); err != nil {
			t.Fatal(err)
		}
		p := gatewaytest.WantProblem(t, h.Do(c), http.StatusForbidden, wire.CodeApprovalStale)
		if p["approval_id"] != id || p["retryable"] != false {
			t.Fatalf("approval_stale members: %v", p)
		}
		if again := pendingID(t, h.Do(c)); again == id {
			t.Fatal("the next call reused the void approval")
		}
		if n := tool.Total.Load(); n != 0 {
			t.Fatalf("a void approval ran %d times", n)
		}
	})
}

func TestCallerApprovalNeedsAPerson(t *testing.T) {
	h, tool := trustHarness(t, []decide.Rule{{Decision: decide.Approve, Approver: decide.Caller}})
	c := acmeRefund("caller", 1, "300")
	id := pendingID(t, h.Do(c))
	resp := postWith(t, h, "/api/tools/v1/approvals/"+id+"/approve", acmeToken, "")
	gatewaytest.WantProblem(t, resp, http.StatusForbidden, wire.CodeNotAnApprover)
	gatewaytest.WantProblem(t, h.Do(c), http.StatusConflict, wire.CodeApprovalPending)
	if n := tool.Total.Load(); n != 0 {
		t.Fatalf("an agent token's approval ran %d calls", n)
	}
}

func TestCallerApprovalByAPersonRunsOnce(t *testing.T) {
	const audience = "http://gateway.test/mcp"
	op := oidctest.Start(t, audience)
	verifier, err := oidcauth.New(oidcauth.Config{Issuer: op.Issuer, Audience: audience, Tenant: "acme"}, oidcauth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tool := gatewaytest.NewTool("refund")
	h := gatewaytest.New(t, gatewaytest.Embedded, []tools.Tool{tool},
		withDecisions(compileRules(t, "refund", []decide.Rule{{Decision: decide.Approve, Approver: decide.Caller}}), decide.ModeEnforce, callpath.ApprovalSettings{}),
		gatewaytest.WithTenants(map[string]string{"acme": acmeToken}), withAdmin(adminToken),
		func(o *callpath.Options) { o.OIDC = verifier })
	// The agent asks with its static token; the person answers with the
	// provider's token (what an MCP host holds for its signed-in user).
	c := acmeRefund("person", 1, "300")
	id := pendingID(t, h.Do(c))
	person := op.Token(t)
	gatewaytest.WantProblem(t, postWith(t, h, "/api/tools/v1/approvals/"+id+"/approve", acmeToken, ""), http.StatusForbidden, wire.CodeNotAnApprover)
	if r := postWith(t, h, "/api/tools/v1/approvals/"+id+"/approve", person, ""); r.Status != http.StatusOK {
		t.Fatalf("the person's approve: %d %s", r.Status, r.Body)
	}
	rec := storedApproval(t, h.Store, id)
	if rec.State != idempotency.StateApproved || !strings.HasPrefix(rec.Approval.DecidedBy, "host-user:") || rec.Approval.Requester != "token:acme" {
		t.Fatalf("approval: %s by %q requested by %q", rec.State, rec.Approval.DecidedBy, rec.Approval.Requester)
	}
	for range 3 {
		if r := h.Do(c); r.Status != http.StatusOK {
			t.Fatalf("approved call: %d %s", r.Status, r.Body)
		}
	}
	if n := tool.Runs(keyOf(t, c)); n != 1 {
		t.Fatalf("ran %d times, want 1", n)
	}
}

// TestRecordNamesItsRequester: the record of a call names the call's
// principal in the admin API on every store, also once its approval was
// consumed and the call ran.
func TestRecordNamesItsRequester(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		h, tool := trustHarnessOn(t, kind, []decide.Rule{{When: "args.amount > 1000", Decision: decide.Approve}, {Decision: decide.Allow}})
		small, big := acmeRefund("who", 1, "10"), acmeRefund("who", 2, "5000")
		if r := h.Do(small); r.Status != http.StatusOK {
			t.Fatalf("allowed call: %d %s", r.Status, r.Body)
		}
		id := pendingID(t, h.Do(big))
		if _, err := h.GW.DecideApproval(context.Background(), id, callpath.ApprovalDecision{Approve: true, Decider: person(t, "ada")}); err != nil {
			t.Fatal(err)
		}
		if r := h.Do(big); r.Status != http.StatusOK {
			t.Fatalf("approved call: %d %s", r.Status, r.Body)
		}
		for _, c := range []gatewaytest.Call{small, big} {
			got := gatewaytest.MustJSON(t, h.Send(http.MethodGet, "/admin/v1/records/acme/refund/"+keyOf(t, c), adminToken).Body)
			if got["state"] != "COMPLETED" || got["requester"] != "token:acme" {
				t.Fatalf("record of %s: state %v requester %v, want COMPLETED by token:acme", c.Args, got["state"], got["requester"])
			}
		}
		if tool.Runs(keyOf(t, small)) != 1 || tool.Runs(keyOf(t, big)) != 1 {
			t.Fatalf("runs: %d and %d, want 1 each", tool.Runs(keyOf(t, small)), tool.Runs(keyOf(t, big)))
		}
	})
}
