package callpath

import (
	"testing"

	"github.com/oklog/ulid/v2"
)

func TestNewULID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		s := newULID()
		id, err := ulid.ParseStrict(s)
		if err != nil {
			t.Fatalf("newULID() = %q: %v", s, err)
		}
		if id.Time() == 0 || seen[s] {
			t.Fatalf("newULID() = %q: zero time or repeated", s)
		}
		seen[s] = true
	}
	if raceEnabled {
		return
	}
	if allocs := testing.AllocsPerRun(100, func() { _ = newULID() }); allocs > 1 {
		t.Errorf("newULID: %v allocations, want 1 (the string)", allocs)
	}
}
