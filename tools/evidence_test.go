package tools_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// TestAdversaryContradictoryOutcomeHeadersAreNoEvidence: only one
// Toolgateway-Outcome value, exactly not-executed, is evidence; two
// headers in either order, a comma list, or another value are not.
func TestAdversaryContradictoryOutcomeHeadersAreNoEvidence(t *testing.T) {
	for _, tc := range []struct {
		values []string
		want   bool
	}{
		{[]string{wire.OutcomeNotExecuted}, true},
		{nil, false},
		{[]string{wire.OutcomeNotExecuted, "executed"}, false},
		{[]string{"executed", wire.OutcomeNotExecuted}, false},
		{[]string{wire.OutcomeNotExecuted, wire.OutcomeNotExecuted}, false},
		{[]string{"not-executed, executed"}, false},
		{[]string{"Not-Executed"}, false},
		{[]string{""}, false},
	} {
		h := http.Header{}
		for _, v := range tc.values {
			h.Add(wire.HeaderOutcome, v)
		}
		if got := tools.HeaderNotExecuted(h); got != tc.want {
			t.Errorf("%q: evidence %v, want %v", tc.values, got, tc.want)
		}
	}
}

// TestNotExecutedStatuses: the defaults of each lease expiry, a list, and
// what a list may hold.
func TestNotExecutedStatuses(t *testing.T) {
	rerun := tools.Policy{LeaseExpiry: tools.LeaseExpiryRerun}
	unknown := tools.Policy{LeaseExpiry: tools.LeaseExpiryUnknown}
	for _, s := range tools.TransientStatuses {
		if !rerun.StatusNotExecuted(s) || unknown.StatusNotExecuted(s) {
			t.Errorf("%d: rerun %v, unknown %v; want true, false", s, rerun.StatusNotExecuted(s), unknown.StatusNotExecuted(s))
		}
	}
	only429, err := tools.NewStatusSet([]int{429})
	if err != nil {
		t.Fatal(err)
	}
	unknown.NotExecutedStatuses = only429
	if !unknown.StatusNotExecuted(429) || unknown.StatusNotExecuted(408) || unknown.StatusNotExecuted(503) {
		t.Errorf("[429]: 429 %v, 408 %v, 503 %v", unknown.StatusNotExecuted(429), unknown.StatusNotExecuted(408), unknown.StatusNotExecuted(503))
	}
	none, _ := tools.NewStatusSet(nil)
	rerun.NotExecutedStatuses = none
	if rerun.StatusNotExecuted(429) || !none.Listed() {
		t.Error("an empty list must list none")
	}
	// A configured list wins over the tool's own, field by field.
	if got := (tools.Policy{NotExecutedStatuses: only429}).Or(tools.Policy{NotExecutedStatuses: none}); !slices.Equal(got.NotExecutedStatuses.Statuses(), []int{429}) {
		t.Errorf("Or: %v", got.NotExecutedStatuses.Statuses())
	}
	for _, bad := range [][]int{{503}, {200}, {429, 429}} {
		if _, err := tools.NewStatusSet(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
