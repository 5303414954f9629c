package decide

import "fmt"

// Mode is the configuration's top-level `mode`: whether decisions are
// enforced or only observed.
type Mode string

// The modes.
const (
	// ModeEnforce enforces every decision; it is the default.
	ModeEnforce Mode = "enforce"
	// ModeObserve takes, counts and records every decision as what would
	// have happened, and runs every call as if allowed; it requests no
	// approval. It lets an operator try rules on real traffic first.
	ModeObserve Mode = "observe"
)

// ParseMode reads a configured mode; empty is [ModeEnforce].
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case "", ModeEnforce:
		return ModeEnforce, nil
	case ModeObserve:
		return ModeObserve, nil
	}
	return "", fmt.Errorf("mode %q: want %q or %q", s, ModeEnforce, ModeObserve)
}

// Apply marks v as observed when m is [ModeObserve], so that
// [Verdict.Effective] allows while v still says what was decided.
func (m Mode) Apply(v Verdict) Verdict {
	v.Observe = m == ModeObserve
	return v
}

// Enforced says whether v is enforced (the metrics' `enforced` label).
func (v Verdict) Enforced() bool { return !v.Observe }

// Effective is what the call path does with v: its [Verdict.Decision] when
// enforced, [Allow] when observed.
func (v Verdict) Effective() Decision {
	if v.Observe {
		return Allow
	}
	return v.Decision
}
