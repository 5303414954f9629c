package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestVersionStampedAtBuild: a binary built with
// -ldflags "-X .../gateway/buildinfo.Stamped=V" prints V for -version (the
// form deploy/Dockerfile uses); one built without prints devel+<commit> or
// devel, never "(devel)".
func TestVersionStampedAtBuild(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ ldflags, want string }{
		{"-X github.com/toolgateway/toolgateway/gateway/buildinfo.Stamped=v9.8.7-test", "gateway v9.8.7-test\n"},
		{"", "gateway devel"},
	} {
		binary := filepath.Join(dir, "gateway")
		if out, err := exec.Command("go", "build", "-ldflags", c.ldflags, "-o", binary, ".").CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		out, err := exec.Command(binary, "-version").Output()
		if err != nil {
			t.Fatalf("-version: %v", err)
		}
		if !strings.HasPrefix(string(out), c.want) || strings.Contains(string(out), "(devel)") {
			t.Fatalf("ldflags %q: -version printed %q, want %q…", c.ldflags, out, c.want)
		}
	}
}
