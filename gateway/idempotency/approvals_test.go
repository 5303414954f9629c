package idempotency

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestApprovalState(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		stored  State
		expires time.Time
		want    State
	}{
		{StateAwaitingApproval, now.Add(time.Second), StateAwaitingApproval},
		{StateAwaitingApproval, now, StateExpired},
		{StateApproved, now.Add(-time.Second), StateExpired},
		{StateApproved, now.Add(time.Second), StateApproved},
		{StateDenied, now.Add(-time.Hour), StateDenied},
		{StateInProgress, now.Add(-time.Hour), StateInProgress},
	} {
		if got := ApprovalState(c.stored, c.expires, now); got != c.want {
			t.Errorf("ApprovalState(%s, expires %v from now) = %s, want %s", c.stored, c.expires.Sub(now), got, c.want)
		}
	}
}

func TestNotPending(t *testing.T) {
	decided := time.Date(2026, 12, 4, 20, 0, 0, 0, time.UTC)
	err := NotPending(StateApproved, &Approval{DecidedBy: "alice", DecidedAt: decided})
	var np *ApprovalNotPendingError
	if !errors.Is(err, ErrApprovalNotPending) || !errors.As(err, &np) || np.DecidedBy != "alice" || !np.DecidedAt.Equal(decided) {
		t.Fatalf("NotPending = %#v", err)
	}
	if !strings.Contains(err.Error(), "APPROVED by alice at 2026-12-04T20:00:00Z") {
		t.Errorf("message %q does not say who decided when", err)
	}
	// An expiry is dated by the approval's expiry.
	expired := NotPending(StateExpired, &Approval{ExpiresAt: decided})
	if !errors.As(expired, &np) || np.State != StateExpired || !np.DecidedAt.Equal(decided) || np.DecidedBy != "" {
		t.Errorf("expired: %#v", np)
	}
}

func TestApprovalValidation(t *testing.T) {
	good := ApprovalClaim{ID: "01J", Timeout: time.Hour, UseWithin: time.Hour}
	if err := good.Validate(); err != nil {
		t.Fatalf("valid approval: %v", err)
	}
	for name, bad := range map[string]ApprovalClaim{
		"no id":      {Timeout: time.Hour, UseWithin: time.Hour},
		"no timeout": {ID: "x", UseWithin: time.Hour},
		"no window":  {ID: "x", Timeout: time.Hour},
		"approver":   {ID: "x", Timeout: time.Hour, UseWithin: time.Hour, Approver: "boss"},
		"reason":     {ID: "x", Timeout: time.Hour, UseWithin: time.Hour, Reason: strings.Repeat("r", maxApprovalText+1)},
	} {
		if bad.Validate() == nil {
			t.Errorf("%s: Validate accepted %+v", name, bad)
		}
		req := ClaimRequest{LockTTL: time.Second, ReplayTTL: time.Second, Owner: "o", ExecutionID: "e", Approval: &bad}
		if req.Validate() == nil {
			t.Errorf("%s: ClaimRequest.Validate accepted it", name)
		}
	}
	if (ApprovalDecision{Approve: true}).Validate() == nil {
		t.Error("a decision without by was accepted")
	}
	if (ApprovalFilter{Limit: 10, State: StateCompleted}).Validate() == nil {
		t.Error("an approval listing of COMPLETED was accepted")
	}
}
