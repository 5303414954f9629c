package tools

import (
	"fmt"
	"strings"
	"testing"
)

// forget undoes a test's global registrations.
func forget(t *testing.T, names ...string) {
	t.Cleanup(func() {
		globalMu.Lock()
		defer globalMu.Unlock()
		for _, name := range names {
			delete(globalTools, name)
		}
	})
}

// registerPanic calls Register and returns what it panicked with.
func registerPanic(t Tool) (recovered any) {
	defer func() { recovered = recover() }()
	Register(t)
	return nil
}

func TestRegisterAndRegisteredSorted(t *testing.T) {
	forget(t, "zz-test-global", "aa-test-global")
	Register(tool("zz-test-global", ""))
	Register(tool("aa-test-global", ""))
	var names []string
	for _, tl := range Registered() {
		names = append(names, tl.Spec().Name)
	}
	joined := strings.Join(names, ",")
	if !strings.Contains(joined, "aa-test-global,zz-test-global") {
		t.Fatalf("Registered() = %v, want both, sorted", names)
	}
}

func TestRegisterPanicsNamingTheTool(t *testing.T) {
	forget(t, "dup-test-global")
	Register(tool("dup-test-global", ""))
	got := registerPanic(tool("dup-test-global", ""))
	if got == nil || !strings.Contains(fmt.Sprint(got), `"dup-test-global"`) {
		t.Fatalf("duplicate Register panicked with %v, want the tool's name", got)
	}
	got = registerPanic(tool("Bad Name", ""))
	if got == nil || !strings.Contains(fmt.Sprint(got), `"Bad Name"`) {
		t.Fatalf("invalid Register panicked with %v, want the tool's name", got)
	}
	if got := registerPanic(nil); got == nil {
		t.Fatal("Register(nil) did not panic")
	}
}
