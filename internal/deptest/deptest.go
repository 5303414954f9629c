// Package deptest pins what a package of this module may import, in the
// style of Tailscale's tstest/deptest: it asks `go list -deps` for
// everything the package builds on and fails on any package of this
// module an allow-list does not name. Standard library and third-party
// packages are not its business; the module's own layers are.
package deptest

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// Module is this module's path; only packages under it are checked.
const Module = "github.com/toolgateway/toolgateway"

// listTimeout bounds one `go list`, which reads only sources and the
// module cache.
const listTimeout = 2 * time.Minute

// Check fails t when pkg (an import path of this module) depends, straight
// or through others, on a package of this module that allow does not
// list. The packages are named by import path; pkg itself is always
// allowed.
func Check(t testing.TB, pkg string, allow []string) {
	t.Helper()
	deps, err := Deps(t.Context(), pkg)
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range deps {
		if dep != pkg && !slices.Contains(allow, dep) {
			t.Errorf("%s depends on %s, which its allow-list does not name", pkg, dep)
		}
	}
}

// Deps returns the packages of this module that pkg builds on, pkg
// included, as `go list -deps` lists them.
func Deps(ctx context.Context, pkg string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "list", "-deps", "-f", "{{.ImportPath}}", pkg).Output()
	if err != nil {
		detail := ""
		if exit, ok := err.(*exec.ExitError); ok {
			detail = ": " + strings.TrimSpace(string(exit.Stderr))
		}
		return nil, &listError{pkg: pkg, err: err, detail: detail}
	}
	var own []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line == Module || strings.HasPrefix(line, Module+"/") {
			own = append(own, line)
		}
	}
	return own, nil
}

// listError is a `go list` that failed, with what it said.
type listError struct {
	pkg, detail string
	err         error
}

func (e *listError) Error() string {
	return "deptest: go list -deps " + e.pkg + ": " + e.err.Error() + e.detail
}

func (e *listError) Unwrap() error { return e.err }
