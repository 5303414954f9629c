package gatewaycmd

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/keyderive"
)

// requestApproval writes a pending approval of an echo call (session s,
// step n, canonical args) as the call path does, and returns its id.
func (f *adminFixture) requestApproval(session string, step uint64, args string) string {
	f.t.Helper()
	key, err := keyderive.Key(session, step, echoName, []byte(args))
	if err != nil {
		f.t.Fatal(err)
	}
	id := ulid.Make().String()
	d, err := f.store.Claim(context.Background(), idempotency.ClaimRequest{
		Scope:       idempotency.Scope{Tenant: "anonymous", Tool: echoName, Key: key},
		Fingerprint: keyderive.Fingerprint([]byte(args)), Step: &idempotency.Step{SessionID: session, Index: step},
		StepGuard: true, StepBoundKey: true, ExecutionID: ulid.Make().String(), Owner: ulid.Make().String(),
		LockTTL: time.Minute, ReplayTTL: time.Hour, CanonicalArguments: []byte(args),
		Approval: &idempotency.ApprovalClaim{ID: id, Rule: 0, Reason: "big refunds need finance",
			Timeout: time.Hour, UseWithin: time.Hour},
	})
	if err != nil || d.Outcome != idempotency.OutcomeAwaitingApproval {
		f.t.Fatalf("claim with approval: %v %v", d.Outcome, err)
	}
	return id
}

// adminAs runs `gateway admin` as the OS user user ($USER).
func (f *adminFixture) adminAs(user string, args ...string) (string, error) {
	f.t.Helper()
	var out bytes.Buffer
	env := envOf(map[string]string{envAdminToken: testAdminToken, "USER": user})
	err := RunIO(context.Background(), append([]string{"gateway", "admin", "-url", f.srv.URL}, args...), env, strings.NewReader(""), &out)
	return out.String(), err
}

// approvalState reads approval id from the store.
func (f *adminFixture) approvalState(id string) idempotency.Record {
	f.t.Helper()
	rec, err := f.store.GetApproval(context.Background(), id)
	if err != nil {
		f.t.Fatalf("GetApproval: %v", err)
	}
	return rec
}

// TestAdminCommandDecidesApprovals walks an approver's path: list the
// pending approvals, read one, approve it (as $USER), deny another with a
// reason; deciding again says who decided first.
func TestAdminCommandDecidesApprovals(t *testing.T) {
	f := newAdminFixture(t)
	yes := f.requestApproval("sess", 1, `{"amount":2000}`)
	no := f.requestApproval("sess", 2, `{"amount":9000}`)

	table := f.mustAdmin("approvals")
	for _, want := range []string{"ID", "STATE", yes, no, "PENDING", echoName, "big refunds need finance", "\n2 approvals\n"} {
		if !strings.Contains(table, want) {
			t.Fatalf("approvals table lacks %q:\n%s", want, table)
		}
	}
	shown := f.mustAdmin("approval", yes)
	for _, want := range []string{"arguments", `{"amount":2000}`, "session_id", "sess", "approver", "operator", "expires_at"} {
		if !strings.Contains(shown, want) {
			t.Fatalf("approval lacks %q:\n%s", want, shown)
		}
	}

	if _, err := f.adminAs("", "approve", yes); err == nil || !strings.Contains(err.Error(), "-by is required") {
		t.Fatalf("approve without -by or $USER: %v", err)
	}
	out, err := f.adminAs("alice", "approve", yes, "-note", "finance said yes")
	if err != nil || !strings.Contains(out, "APPROVED") || !strings.Contains(out, "alice") {
		t.Fatalf("approve: %v\n%s", err, out)
	}
	if rec := f.approvalState(yes); rec.State != idempotency.StateApproved || rec.Approval.DecidedBy != "token:admin" || rec.Approval.ClaimedBy != "alice" || rec.Approval.Note != "finance said yes" {
		t.Fatalf("the store says %s by %q note %q", rec.State, rec.Approval.DecidedBy, rec.Approval.Note)
	}
	if _, err := f.adminAs("bob", "approve", yes, "-by", "bob"); err == nil ||
		!strings.Contains(err.Error(), "409 approval_not_pending") || !strings.Contains(err.Error(), "APPROVED by token:admin at ") {
		t.Fatalf("second approve: %v", err)
	}

	if _, err := f.adminAs("carol", "deny", no); err == nil || !strings.Contains(err.Error(), "-reason is required") {
		t.Fatalf("deny without -reason: %v", err)
	}
	if rec := f.approvalState(no); rec.State != idempotency.StateAwaitingApproval {
		t.Fatalf("a refused deny changed the approval: %s", rec.State)
	}
	if out, err := f.adminAs("", "deny", no, "-reason", "too much", "-by", "carol"); err != nil || !strings.Contains(out, "DENIED") {
		t.Fatalf("deny: %v\n%s", err, out)
	}
	if rec := f.approvalState(no); rec.State != idempotency.StateDenied || rec.Approval.DecidedBy != "token:admin" || rec.Approval.ClaimedBy != "carol" || rec.Approval.Note != "too much" {
		t.Fatalf("the store says %s by %q note %q", rec.State, rec.Approval.DecidedBy, rec.Approval.Note)
	}

	var listing struct {
		Approvals []struct {
			ID    string `json:"id"`
			State string `json:"state"`
		} `json:"approvals"`
	}
	if err := json.Unmarshal([]byte(f.mustAdmin("approvals", "-state", "denied", "-json")), &listing); err != nil {
		t.Fatal(err)
	}
	if len(listing.Approvals) != 1 || listing.Approvals[0].ID != no || listing.Approvals[0].State != "DENIED" {
		t.Fatalf("-state denied lists %+v", listing.Approvals)
	}
	if all := f.mustAdmin("approvals", "-state", "all", "-limit", "1", "-all"); !strings.Contains(all, "\n2 approvals\n") {
		t.Fatalf("-state all:\n%s", all)
	}
	if approved := f.mustAdmin("approvals", "-state", "APPROVED"); !strings.Contains(approved, yes) || !strings.Contains(approved, "alice") || !strings.Contains(approved, "\n1 approval\n") {
		t.Fatalf("-state APPROVED:\n%s", approved)
	}
	if pending := f.mustAdmin("approvals"); !strings.Contains(pending, "\n0 approvals\n") {
		t.Fatalf("pending after deciding both:\n%s", pending)
	}
	if _, err := f.admin("approve", ulid.Make().String(), "-by", "alice"); err == nil || !strings.Contains(err.Error(), "404 record_not_found") {
		t.Fatalf("unknown approval: %v", err)
	}
	if out, err := f.admin("deny", "-h"); err != nil || !strings.Contains(out, "-reason") {
		t.Fatalf("deny -h: %v\n%s", err, out)
	}
}

// TestAdminCommandShowsArgumentsEscaped: arguments with a direction
// override print as its escape, so the terminal shows what the caller
// sent.
func TestAdminCommandShowsArgumentsEscaped(t *testing.T) {
	f := newAdminFixture(t)
	id := f.requestApproval("sess", 1, "{\"file\":\"invoice\u202efdp.exe\"}")
	shown, err := f.adminAs("alice", "approval", id)
	if err != nil || !strings.Contains(shown, `invoice\u202efdp.exe`) || strings.ContainsRune(shown, '\u202e') {
		t.Fatalf("approval not escaped (%v):\n%q", err, shown)
	}
}
