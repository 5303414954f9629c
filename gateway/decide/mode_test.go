package decide_test

import (
	"context"
	"testing"

	"github.com/toolgateway/toolgateway/gateway/decide"
)

// TestParseMode checks the configured spellings.
func TestParseMode(t *testing.T) {
	for in, want := range map[string]decide.Mode{"": decide.ModeEnforce, "enforce": decide.ModeEnforce, "observe": decide.ModeObserve} {
		if got, err := decide.ParseMode(in); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := decide.ParseMode("Observe"); err == nil || err.Error() != `mode "Observe": want "enforce" or "observe"` {
		t.Errorf("ParseMode(Observe) error = %v", err)
	}
}

// TestModeApply checks observe mode keeps the decision but runs the call.
func TestModeApply(t *testing.T) {
	p := mustCompile(t, "refund", refundRules)
	denied, err := p.Decide(context.Background(), restCall(`{"amount":50000}`))
	if err != nil {
		t.Fatal(err)
	}
	observed := decide.ModeObserve.Apply(denied)
	if observed.Decision != decide.Deny || observed.Enforced() || observed.Effective() != decide.Allow {
		t.Errorf("observed = %+v (enforced %v, effective %s); want a deny, not enforced, run as allow",
			observed, observed.Enforced(), observed.Effective())
	}
	enforced := decide.ModeEnforce.Apply(observed)
	if !enforced.Enforced() || enforced.Effective() != decide.Deny {
		t.Errorf("enforced = %+v; want an enforced deny", enforced)
	}
	if !denied.Enforced() || denied.Effective() != decide.Deny {
		t.Errorf("Decide's own verdict %+v should be enforced", denied)
	}
}
