package mcpserver

import (
	"encoding/json"
	"testing"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/tools"
)

// TestElicitedDecision: accept with approve true approves; accept with
// approve false, and decline, deny; cancel, a missing or malformed answer
// decide nothing.
func TestElicitedDecision(t *testing.T) {
	cases := []struct {
		responses        string
		approve, decided bool
	}{
		{`{"approve":{"action":"accept","content":{"approve":true}}}`, true, true},
		{`{"approve":{"action":"accept","content":{"approve":false}}}`, false, true},
		{`{"approve":{"action":"accept","content":{"approve":"yes"}}}`, false, true},
		{`{"approve":{"action":"decline"}}`, false, true},
		{`{"approve":{"action":"cancel"}}`, false, false},
		{`{"other":{"action":"accept","content":{"approve":true}}}`, false, false},
		{`[]`, false, false},
	}
	for _, c := range cases {
		approve, decided := elicitedDecision(json.RawMessage(c.responses))
		if approve != c.approve || decided != c.decided {
			t.Errorf("%s: approve %v decided %v, want %v %v", c.responses, approve, decided, c.approve, c.decided)
		}
	}
}

// TestCallerCanBeAsked: only a client that takes input requests and
// declared form elicitation (an empty elicitation capability is form).
func TestCallerCanBeAsked(t *testing.T) {
	cases := []struct {
		accepts      bool
		capabilities string
		want         bool
	}{
		{true, `{"elicitation":{}}`, true},
		{true, `{"elicitation":{"form":{}}}`, true},
		{true, `{"elicitation":{"form":{},"url":{}}}`, true},
		{true, `{"elicitation":{"url":{}}}`, false},
		{true, `{"sampling":{}}`, false},
		{true, ``, false},
		{false, `{"elicitation":{}}`, false},
	}
	for _, c := range cases {
		meta := map[string]json.RawMessage{}
		if c.capabilities != "" {
			meta[metaClientCapabilities] = json.RawMessage(c.capabilities)
		}
		if got := callerCanBeAsked(callpath.MultiRoundTrip{AcceptsInputRequests: c.accepts}, meta); got != c.want {
			t.Errorf("accepts %v, capabilities %s: %v, want %v", c.accepts, c.capabilities, got, c.want)
		}
	}
}

// TestApprovalContinuation: only a requestState of the gateway's, with an
// id, is an answer to an approval.
func TestApprovalContinuation(t *testing.T) {
	for state, want := range map[string]string{
		approvalStatePrefix + "01JD8ZK3V6Q3H1T9W3C0X5N7RM": "01JD8ZK3V6Q3H1T9W3C0X5N7RM",
		approvalStatePrefix: "",
		"upstream-state":    "",
	} {
		id, ok := approvalContinuation(callpath.MultiRoundTrip{Continuation: &tools.Continuation{RequestState: state}})
		if id != want || ok != (want != "") {
			t.Errorf("%q: %q %v, want %q", state, id, ok, want)
		}
	}
	if _, ok := approvalContinuation(callpath.MultiRoundTrip{}); ok {
		t.Error("a first round is no continuation")
	}
}
