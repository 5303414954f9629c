package verify_test

import (
	"strings"
	"testing"

	"github.com/toolgateway/toolgateway/internal/deptest"
)

// TestVerifyImportsNoCommand pins the harness below the command line: it
// imports nothing of gateway/gatewaycmd (nor of a cmd/ program), which
// imports it and hands it what it needs in a verify.Program.
func TestVerifyImportsNoCommand(t *testing.T) {
	const m = deptest.Module
	deps, err := deptest.Deps(t.Context(), m+"/gateway/verify")
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range deps {
		if dep == m+"/gateway/gatewaycmd" || strings.HasPrefix(dep, m+"/cmd/") {
			t.Errorf("gateway/verify depends on %s", dep)
		}
	}
}
