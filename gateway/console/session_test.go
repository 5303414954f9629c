package console_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

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
