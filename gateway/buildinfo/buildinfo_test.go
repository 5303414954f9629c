package buildinfo

import (
	"runtime/debug"
	"testing"
)

// TestFromBuildInfo: the module version of `go install m@v1.2.3` wins;
// a checkout build names its commit; nothing known is "devel".
func TestFromBuildInfo(t *testing.T) {
	for _, c := range []struct {
		name string
		info debug.BuildInfo
		want string
	}{
		{"go install", debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3"},
		{"checkout", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "false"}}}, "devel+0123456789ab"},
		{"dirty checkout", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}}, "devel+0123456789ab-dirty"},
		{"nothing known", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "devel"},
	} {
		if got := fromBuildInfo(&c.info); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// TestStampedWins: a version stamped with -ldflags is the version.
func TestStampedWins(t *testing.T) {
	old := Stamped
	t.Cleanup(func() { Stamped = old })
	Stamped = "v9.9.9"
	if got := Version(); got != "v9.9.9" {
		t.Fatalf("Version() = %q with a stamp", got)
	}
}
