package agentclient_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/agentclient"
	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/decide"
	"github.com/toolgateway/toolgateway/gateway/idempotency/boltstore"
	"github.com/toolgateway/toolgateway/gateway/oidcauth"
	"github.com/toolgateway/toolgateway/internal/oidctest"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/tools/builtin"
	"github.com/toolgateway/toolgateway/wire"
)

const approvalsAdminToken = "approvals-admin-token"

// decidingGateway serves a real gateway whose echo tool has decide rules:
// {"approver":"operator"} waits for an operator, {"approver":"caller"} for
// the caller's own human, {"deny":true} is denied, anything else runs.
func decidingGateway(t *testing.T, opts ...func(*callpath.Options)) (url string, set *builtin.Set) {
	t.Helper()
	store, err := boltstore.Open(filepath.Join(t.TempDir(), "gateway.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	set = builtin.NewSet()
	registry, err := tools.NewRegistryOf(set.Tools()...)
	if err != nil {
		t.Fatal(err)
	}
	policy, err := decide.Compile(builtin.EchoName, []decide.Rule{
		{When: `has(args.approver) && args.approver == "operator"`, Decision: decide.Approve, Approver: decide.Operator, Reason: "operator says"},
		{When: `has(args.approver) && args.approver == "caller"`, Decision: decide.Approve, Approver: decide.Caller, Reason: "the caller's human says"},
		{When: `has(args.deny)`, Decision: decide.Deny, Reason: "never"},
		{Decision: decide.Allow},
	})
	if err != nil {
		t.Fatal(err)
	}
	adminSHA := sha256.Sum256([]byte(approvalsAdminToken))
	options := callpath.Options{Store: store, Tools: registry, AdminTokenSHA256: &adminSHA,
		Decisions: map[string]*decide.Policy{builtin.EchoName: policy}}
	for _, opt := range opts {
		opt(&options)
	}
	gw, err := gateway.NewServer(options)
	if err != nil {
		t.Fatal(err)
	}
	server := httptest.NewServer(gw)
	t.Cleanup(server.Close)
	return server.URL, set
}

// operatorDecides approves or denies id through the admin API.
func operatorDecides(t *testing.T, base, id, decision string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/admin/v1/approvals/"+id+"/"+decision,
		bytes.NewReader([]byte(`{"by":"maria@finance","note":"checked"}`)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+approvalsAdminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("admin %s %s: status %d", decision, id, resp.StatusCode)
	}
}

func pendingOf(t *testing.T, err error) *agentclient.ApprovalPendingError {
	t.Helper()
	var pending *agentclient.ApprovalPendingError
	if !errors.As(err, &pending) {
		t.Fatalf("error = %v, want an *ApprovalPendingError", err)
	}
	return pending
}

func TestCallReturnsApprovalPendingAtOnceAndRunsOnceApproved(t *testing.T) {
	base, set := decidingGateway(t)
	// Prefer: wait off, and one attempt allowed: a Call that retried
	// approval_pending would fail with another error.
	client := agentclient.New(base, agentclient.WithPreferWait(0), agentclient.WithMaxAttempts(1))
	session := client.Session("approvals-operator")
	args := map[string]any{"approver": "operator", "amount": 2000}
	ctx := context.Background()

	_, err := session.Call(ctx, 1, builtin.EchoName, args)
	pending := pendingOf(t, err)
	if pending.ApprovalID == "" || pending.ExpiresAt.Before(time.Now()) {
		t.Fatalf("pending = %+v, want an id and a future expiry", pending)
	}
	var problem *agentclient.Error
	if !errors.As(err, &problem) || problem.Code != wire.CodeApprovalPending || problem.Status != http.StatusConflict || problem.RetryAfter <= 0 {
		t.Fatalf("problem = %+v, want 409 approval_pending with Retry-After", problem)
	}
	_, err = session.Call(ctx, 1, builtin.EchoName, args)
	if again := pendingOf(t, err); again.ApprovalID != pending.ApprovalID {
		t.Fatalf("second call's approval %s, want the same %s", again.ApprovalID, pending.ApprovalID)
	}
	// The tenant cannot decide an operator's approval.
	err = session.Approve(ctx, pending.ApprovalID, "me")
	if !errors.As(err, &problem) || problem.Code != wire.CodeApprovalNotYours {
		t.Fatalf("caller approving an operator approval: %v, want approval_not_yours", err)
	}
	if n := set.Executions(builtin.EchoName); n != 0 {
		t.Fatalf("echo ran %d times while pending, want 0", n)
	}

	operatorDecides(t, base, pending.ApprovalID, "approve")
	first, err := session.Call(ctx, 1, builtin.EchoName, args)
	if err != nil || first.Replayed {
		t.Fatalf("after approval: %v (replayed %v), want a run", err, first != nil && first.Replayed)
	}
	second, err := session.Call(ctx, 1, builtin.EchoName, args)
	if err != nil || !second.Replayed || !bytes.Equal(first.Body, second.Body) {
		t.Fatalf("repeat after the run: %v, want the same outcome replayed", err)
	}
	if n := set.ExecutionsForKey(builtin.EchoName, first.Key); n != 1 {
		t.Fatalf("echo ran %d times, want 1", n)
	}
}

// TestSessionApproveAndDenyCallerApprovals: approver: caller means a
// person. The agent approving its own call with its static token is
// refused (403 not_an_approver) and runs nothing, however often it tries;
// a person's approval (their access token from a real OpenID provider,
// sent with DecidedBy) runs the call once, and their denial reaches the
// call with its note.
func TestSessionApproveAndDenyCallerApprovals(t *testing.T) {
	const audience = "http://gateway.test/mcp"
	const agentToken = "approvals-agent-token"
	op := oidctest.Start(t, audience)
	verifier, err := oidcauth.New(oidcauth.Config{Issuer: op.Issuer, Audience: audience, Tenant: "acme"}, oidcauth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	base, set := decidingGateway(t, func(o *callpath.Options) {
		o.Tenants = append(o.Tenants, callpath.Tenant{Name: "acme", TokenSHA256: sha256.Sum256([]byte(agentToken))})
		o.OIDC = verifier
	})
	client := agentclient.New(base, agentclient.WithToken(agentToken), agentclient.WithPreferWait(0))
	session := client.Session("approvals-caller")
	ctx := context.Background()
	person := agentclient.DecidedBy(op.Token(t))

	selfApproved := map[string]any{"approver": "caller", "amount": 0}
	_, err = session.Call(ctx, 0, builtin.EchoName, selfApproved)
	pending := pendingOf(t, err)
	for range 3 {
		var refused *agentclient.Error
		if err := session.Approve(ctx, pending.ApprovalID, "I approve myself"); !errors.As(err, &refused) || refused.Code != wire.CodeNotAnApprover {
			t.Fatalf("the agent's own Approve: %v, want 403 not_an_approver", err)
		}
		_, err = session.Call(ctx, 0, builtin.EchoName, selfApproved)
		pendingOf(t, err)
	}
	if n := set.Executions(builtin.EchoName); n != 0 {
		t.Fatalf("an agent approving its own call ran it %d times, want 0", n)
	}

	approved := map[string]any{"approver": "caller", "amount": 1}
	_, err = session.Call(ctx, 1, builtin.EchoName, approved)
	pending = pendingOf(t, err)
	if err := session.Approve(ctx, pending.ApprovalID, "yes, that one", person); err != nil {
		t.Fatalf("Approve: %v", err)
	}
	var problem *agentclient.Error
	if err := session.Approve(ctx, pending.ApprovalID, "", person); !errors.As(err, &problem) || problem.Code != wire.CodeApprovalNotPending {
		t.Fatalf("approving twice: %v, want approval_not_pending", err)
	}
	result, err := session.Call(ctx, 1, builtin.EchoName, approved)
	if err != nil {
		t.Fatalf("call after Approve: %v", err)
	}
	if n := set.ExecutionsForKey(builtin.EchoName, result.Key); n != 1 {
		t.Fatalf("echo ran %d times, want 1", n)
	}

	denied := map[string]any{"approver": "caller", "amount": 2}
	_, err = session.Call(ctx, 2, builtin.EchoName, denied)
	pending = pendingOf(t, err)
	if err := session.Deny(ctx, pending.ApprovalID, "not today", person); err != nil {
		t.Fatalf("Deny: %v", err)
	}
	_, err = session.Call(ctx, 2, builtin.EchoName, denied)
	if !errors.As(err, &problem) || problem.Code != wire.CodeApprovalDenied || problem.Reason != "not today" || problem.ApprovalID != pending.ApprovalID {
		t.Fatalf("call after Deny: %v (%+v), want approval_denied with the note", err, problem)
	}
	var stillPending *agentclient.ApprovalPendingError
	if errors.As(err, &stillPending) {
		t.Fatal("a denied call came back as pending")
	}
	if n := set.Executions(builtin.EchoName); n != 1 {
		t.Fatalf("echo ran %d times in all, want 1 (the denied call never runs)", n)
	}
}
