package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// Principals and quorums: every store keeps an approval's requester,
// quorum, binding, approvers and claimed name, and counts a quorum in one
// atomic DecideApproval (idempotency.PrincipalKeeper), so four eyes,
// stale approvals and quorums hold on every store.
func approvalPrincipalCases() []testCase {
	return []testCase{
		{"ApprovalPrincipalsKept", testApprovalPrincipalsKept},
		{"ApprovalQuorumNeedsDistinctPrincipals", testApprovalQuorumNeedsDistinctPrincipals},
		{"ApprovalQuorumFirstDenyIsFinal", testApprovalQuorumFirstDenyIsFinal},
		{"ApprovalQuorumRace", testApprovalQuorumRace},
		{"ApprovalDecidedKeepsExpiry", testApprovalDecidedKeepsExpiry},
		{"RecordKeepsRequester", testRecordKeepsRequester},
	}
}

// The binding a claim records: a SHA-256 in hex, as the engine makes it.
var testBinding = strings.Repeat("ab", 32)

// quorumRequest is an approval request by requester whose rule needs
// quorum distinct approvers.
func (f *fixture) quorumRequest(key string, quorum int) idempotency.ClaimRequest {
	req := f.approvalRequest(f.scope("refund", key), fingerprintA, nil)
	req.Requester = "host-user:idp.example.com:rita"
	req.Approval.Requester = req.Requester
	req.Approval.Quorum = quorum
	req.Approval.Binding = testBinding
	return req
}

// requirePrincipals fails the case for a store that does not keep them.
func (f *fixture) requirePrincipals() {
	f.t.Helper()
	if !idempotency.KeepsPrincipals(f.store) {
		f.t.Fatalf("%T does not keep approvals' principals (idempotency.PrincipalKeeper)", f.store)
	}
}

// decideAs decides id as by, with the admin token's claimed name claimed.
func (f *fixture) decideAs(id string, approve bool, by, claimed, note string) idempotency.Record {
	f.t.Helper()
	rec, err := f.approvals().DecideApproval(f.ctx, id, idempotency.ApprovalDecision{Approve: approve, By: by, ClaimedBy: claimed, Note: note})
	if err != nil {
		f.t.Fatalf("DecideApproval(%s, %v, %s): %v", id, approve, by, err)
	}
	return rec
}

// expectApproval fails unless a shows the request's requester, quorum and
// binding and exactly the approvers want, in order.
func (f *fixture) expectApproval(where string, a *idempotency.Approval, req idempotency.ClaimRequest, want ...string) {
	f.t.Helper()
	if a == nil {
		f.t.Fatalf("%s: no approval", where)
	}
	if a.Requester != req.Approval.Requester || a.Quorum != req.Approval.Quorum || a.Binding != req.Approval.Binding {
		f.t.Errorf("%s: requester %q quorum %d binding %q, want %q %d %q", where, a.Requester, a.Quorum, a.Binding,
			req.Approval.Requester, req.Approval.Quorum, req.Approval.Binding)
	}
	if !slices.Equal(a.ApprovedBy, want) && (len(a.ApprovedBy) != 0 || len(want) != 0) {
		f.t.Errorf("%s: approved by %q, want %q", where, a.ApprovedBy, want)
	}
}

// listed returns the listed record carrying approval id.
func (f *fixture) listed(id string) idempotency.Record {
	f.t.Helper()
	page, err := f.approvals().ListApprovals(f.ctx, idempotency.ApprovalFilter{Tool: "refund", Limit: 100})
	if err != nil {
		f.t.Fatalf("ListApprovals: %v", err)
	}
	for _, r := range page.Records {
		if r.Approval != nil && r.Approval.ID == id {
			return r
		}
	}
	f.t.Fatalf("ListApprovals does not show approval %s", id)
	return idempotency.Record{}
}

func testApprovalPrincipalsKept(f *fixture) {
	f.requirePrincipals()
	req := f.quorumRequest("principals", 1)
	a := f.pending(req)
	f.expectApproval("pending claim", &a, req)
	again := f.expect(f.again(req), idempotency.OutcomeAwaitingApproval)
	f.expectApproval("retry", again.Approval, req)
	f.expectApproval("Get", f.get(req.Scope).Approval, req)
	f.expectApproval("GetApproval", f.getApproval(a.ID).Approval, req)
	f.expectApproval("ListApprovals", f.listed(a.ID).Approval, req)

	rec := f.decideAs(a.ID, true, "token:admin", "alice", "checked")
	if rec.State != idempotency.StateApproved || rec.Approval.DecidedBy != "token:admin" || rec.Approval.ClaimedBy != "alice" {
		f.t.Fatalf("approved: %s by %q claimed %q, want APPROVED by token:admin claimed alice", rec.State, rec.Approval.DecidedBy, rec.Approval.ClaimedBy)
	}
	f.expectApproval("decided", rec.Approval, req, "token:admin")
	for where, got := range map[string]idempotency.Record{"Get": f.get(req.Scope), "GetApproval": f.getApproval(a.ID), "ListApprovals": f.listed(a.ID)} {
		if got.Approval == nil || got.Approval.ClaimedBy != "alice" || got.Approval.DecidedBy != "token:admin" {
			f.t.Errorf("%s after the decision: %+v, want claimed_by alice beside token:admin", where, got.Approval)
		}
		f.expectApproval(where+" after the decision", got.Approval, req, "token:admin")
	}
	// The consuming claim carries the approval as decided, binding
	// included, so the engine can find it stale.
	run := f.again(req)
	d := f.expect(run, idempotency.OutcomeClaimed)
	f.expectApproval("consuming claim", d.Approval, req, "token:admin")
	if d.Approval.ClaimedBy != "alice" {
		f.t.Errorf("consuming claim's approval claimed by %q, want alice", d.Approval.ClaimedBy)
	}
}

func testApprovalQuorumNeedsDistinctPrincipals(f *fixture) {
	f.requirePrincipals()
	req := f.quorumRequest("quorum", 2)
	a := f.pending(req)

	first := f.decideAs(a.ID, true, "oidc:idp.example.com:ada", "", "")
	if first.State != idempotency.StateAwaitingApproval || first.Approval.DecidedBy != "" || !first.Approval.DecidedAt.IsZero() {
		f.t.Fatalf("after one of two approvers: %s decided by %q at %v, want still AWAITING_APPROVAL, undecided",
			first.State, first.Approval.DecidedBy, first.Approval.DecidedAt)
	}
	f.expectApproval("one approver", first.Approval, req, "oidc:idp.example.com:ada")
	if !first.Approval.ExpiresAt.Equal(a.ExpiresAt) {
		f.t.Errorf("one approver moved the expiry from %v to %v", a.ExpiresAt, first.Approval.ExpiresAt)
	}
	// Nothing runs on one approval.
	d := f.expect(f.again(req), idempotency.OutcomeAwaitingApproval)
	f.expectApproval("claim after one approver", d.Approval, req, "oidc:idp.example.com:ada")

	// The same principal again counts once.
	twice := f.decideAs(a.ID, true, "oidc:idp.example.com:ada", "", "")
	if twice.State != idempotency.StateAwaitingApproval {
		f.t.Fatalf("the same principal approving twice: %s, want AWAITING_APPROVAL", twice.State)
	}
	f.expectApproval("the same approver twice", twice.Approval, req, "oidc:idp.example.com:ada")
	f.expectApproval("GetApproval", f.getApproval(a.ID).Approval, req, "oidc:idp.example.com:ada")
	if got := f.listed(a.ID); got.State != idempotency.StateAwaitingApproval {
		f.t.Errorf("listed after one approver: %s", got.State)
	}
	f.expectApprovals(idempotency.ApprovalFilter{State: idempotency.StateAwaitingApproval, Tool: "refund"}, a.ID)
	f.expect(f.again(req), idempotency.OutcomeAwaitingApproval)

	second := f.decideAs(a.ID, true, "oidc:idp.example.com:bob", "", "")
	if second.State != idempotency.StateApproved || second.Approval.DecidedBy != "oidc:idp.example.com:bob" || second.Approval.DecidedAt.IsZero() {
		f.t.Fatalf("after two approvers: %s decided by %q, want APPROVED by bob", second.State, second.Approval.DecidedBy)
	}
	f.expectApproval("two approvers", second.Approval, req, "oidc:idp.example.com:ada", "oidc:idp.example.com:bob")
	f.expectApprovals(idempotency.ApprovalFilter{State: idempotency.StateAwaitingApproval, Tool: "refund"})
	f.expectNotPending(a.ID, idempotency.StateApproved, "oidc:idp.example.com:bob")

	run := f.again(req)
	claimed := f.expect(run, idempotency.OutcomeClaimed)
	f.checkLease(run, claimed)
	f.expect(f.again(req), idempotency.OutcomeInProgress)
}

func testApprovalQuorumFirstDenyIsFinal(f *fixture) {
	f.requirePrincipals()
	req := f.quorumRequest("quorum-deny", 3)
	a := f.pending(req)
	f.decideAs(a.ID, true, "oidc:idp.example.com:ada", "", "")
	denied := f.decideAs(a.ID, false, "oidc:idp.example.com:bob", "", "not this customer")
	if denied.State != idempotency.StateDenied || denied.Approval.DecidedBy != "oidc:idp.example.com:bob" || denied.Approval.Note != "not this customer" {
		f.t.Fatalf("deny after one approval: %s by %q note %q, want DENIED by bob", denied.State, denied.Approval.DecidedBy, denied.Approval.Note)
	}
	f.expectApproval("denied", denied.Approval, req, "oidc:idp.example.com:ada")
	f.expectNotPending(a.ID, idempotency.StateDenied, "oidc:idp.example.com:bob")
	f.expect(f.again(req), idempotency.OutcomeApprovalDenied)
	if got := f.getApproval(a.ID); got.State != idempotency.StateDenied || !got.Approval.ExpiresAt.Equal(a.ExpiresAt) {
		f.t.Errorf("GetApproval after the deny: %s expires %v, want DENIED keeping %v", got.State, got.Approval.ExpiresAt, a.ExpiresAt)
	}
}

// testApprovalQuorumRace: two principals approve a quorum-2 approval at
// the same time, and in other rounds one approves while another denies.
// Each round leaves exactly one final state, returned to exactly one of
// them, with every approver counted once.
func testApprovalQuorumRace(f *fixture) {
	f.requirePrincipals()
	const rounds = 10
	ada, bob := "oidc:idp.example.com:ada", "oidc:idp.example.com:bob"
	for round := range rounds {
		deny := round%2 == 1
		req := f.quorumRequest(fmt.Sprintf("quorum-race-%d", round), 2)
		a := f.pending(req)
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			results [2]idempotency.Record
			errs    [2]error
		)
		for i, by := range []string{ada, bob} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				approve := !(deny && i == 1)
				results[i], errs[i] = f.approvals().DecideApproval(f.ctx, a.ID,
					idempotency.ApprovalDecision{Approve: approve, By: by, Note: "n"})
			}()
		}
		close(start)
		wg.Wait()

		final, want := 0, idempotency.StateApproved
		if deny {
			want = idempotency.StateDenied
		}
		for i, err := range errs {
			switch {
			case err == nil && results[i].State == want:
				final++
			case err == nil && results[i].State == idempotency.StateAwaitingApproval:
			case deny && i == 0 && errors.Is(err, idempotency.ErrApprovalNotPending):
				// ada's approve came after bob's deny
			default:
				f.t.Fatalf("round %d: decider %d: %v state %s", round, i, err, results[i].State)
			}
		}
		if final != 1 {
			f.t.Fatalf("round %d: %d deciders were told %s, want exactly 1", round, final, want)
		}
		got := f.getApproval(a.ID)
		if got.State != want {
			f.t.Fatalf("round %d: stored %s, want %s", round, got.State, want)
		}
		if !deny {
			if len(got.Approval.ApprovedBy) != 2 || !slices.Contains(got.Approval.ApprovedBy, ada) || !slices.Contains(got.Approval.ApprovedBy, bob) ||
				got.Approval.DecidedBy != got.Approval.ApprovedBy[1] {
				f.t.Fatalf("round %d: approved by %q decided by %q, want both, the second deciding", round, got.Approval.ApprovedBy, got.Approval.DecidedBy)
			}
			f.expect(f.again(req), idempotency.OutcomeClaimed)
		} else {
			if got.Approval.DecidedBy != bob {
				f.t.Fatalf("round %d: denied by %q, want bob", round, got.Approval.DecidedBy)
			}
			f.expect(f.again(req), idempotency.OutcomeApprovalDenied)
		}
	}
}

// testApprovalDecidedKeepsExpiry: a denied approval shows its original
// expiry wherever it is read, not the moment of the denial; a quorum's
// partial approvals leave it alone too.
func testApprovalDecidedKeepsExpiry(f *fixture) {
	req := f.approvalRequest(f.scope("refund", "deny-expiry"), fingerprintA, nil)
	a := f.pending(req)
	f.decide(a.ID, false, "bob", "no")
	for where, got := range map[string]idempotency.Record{"Get": f.get(req.Scope), "GetApproval": f.getApproval(a.ID), "ListApprovals": f.listed(a.ID)} {
		if got.State != idempotency.StateDenied || !got.Approval.ExpiresAt.Equal(a.ExpiresAt) {
			f.t.Errorf("%s: %s expires %v, want DENIED with its original expiry %v", where, got.State, got.Approval.ExpiresAt, a.ExpiresAt)
		}
	}
	d := f.expect(f.again(req), idempotency.OutcomeApprovalDenied)
	if !d.Approval.ExpiresAt.Equal(a.ExpiresAt) {
		f.t.Errorf("denied claim's approval expires %v, want %v", d.Approval.ExpiresAt, a.ExpiresAt)
	}
}

// testRecordKeepsRequester: every record keeps the principal of the call
// that wrote it, through completion, listing, a takeover and the
// consumption of its approval (receipts of operators' actions on the
// record name it).
func testRecordKeepsRequester(f *fixture) {
	const rita, sam = "host-user:idp.example.com:rita", "token:other"
	req := f.request(f.scope("refund", "requester"), fingerprintA, nil)
	req.Requester = rita
	req.LockTTL = shortLease
	lease := f.claimed(req)
	if got := f.get(req.Scope); got.Requester != rita {
		f.t.Fatalf("IN_PROGRESS record's requester %q, want %q", got.Requester, rita)
	}
	// A takeover by another principal's retry keeps the record's requester.
	time.Sleep(expireWait)
	retry := f.fresh(req)
	retry.Requester = sam
	taken := f.expect(retry, idempotency.OutcomeClaimed)
	if !taken.TakenOver {
		f.t.Fatalf("retry after the lease: %+v, want a takeover", taken)
	}
	f.expectLeaseLost(lease, "complete")
	f.complete(taken.Lease, jsonResponse(`{"ok":true}`), replayTTL)
	if got := f.get(req.Scope); got.State != idempotency.StateCompleted || got.Requester != rita {
		f.t.Fatalf("COMPLETED record: %s requester %q, want %q", got.State, got.Requester, rita)
	}
	for _, r := range f.listAll(idempotency.ListFilter{Tool: "refund", Limit: 100}) {
		if r.Scope == req.Scope && r.Requester != rita {
			f.t.Errorf("listed record's requester %q, want %q", r.Requester, rita)
		}
	}

	// An approval record: the record and its approval name the requester,
	// and the record keeps it once its approval is consumed.
	areq := f.quorumRequest("requester-approval", 1)
	a := f.pending(areq)
	if got := f.getApproval(a.ID); got.Requester != areq.Requester || got.Approval.Requester != areq.Requester {
		f.t.Fatalf("approval record's requester %q, approval's %q, want %q", got.Requester, got.Approval.Requester, areq.Requester)
	}
	f.decide(a.ID, true, "oidc:idp.example.com:ada", "")
	run := f.again(areq)
	run.Requester = sam
	f.expect(run, idempotency.OutcomeClaimed)
	if got := f.get(areq.Scope); got.State != idempotency.StateInProgress || got.Requester != areq.Requester {
		f.t.Fatalf("consumed approval's record: %s requester %q, want %q", got.State, got.Requester, areq.Requester)
	}
}
