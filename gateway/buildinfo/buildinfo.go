// Package buildinfo is the one answer to "which gateway is this": the
// version `gateway -version` prints, the MCP endpoint's serverInfo, the
// gateway_build_info metric, the startup log line and the spans'
// service.version all read Version() here.
package buildinfo

import (
	"runtime/debug"
	"strings"
)

// Stamped is set at build time:
//
//	go build -ldflags "-X github.com/toolgateway/toolgateway/gateway/buildinfo.Stamped=v1.2.3" ./cmd/gateway
//
// Empty (a plain go build or go install): Version falls back to the
// module version or the VCS revision.
var Stamped = ""

// Version is the gateway's version: the stamped one; else the module
// version when the binary was built by `go install module@version`; else,
// for a build from a checkout, "devel+" and the first 12 hex digits of the
// commit (with "-dirty" when the tree had changes); else "devel".
func Version() string {
	if Stamped != "" {
		return Stamped
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	return fromBuildInfo(info)
}

// fromBuildInfo is Version without a stamp, for the build info given.
func fromBuildInfo(info *debug.BuildInfo) string {
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var revision string
	var dirty bool
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if revision == "" {
		return "devel"
	}
	var b strings.Builder
	b.WriteString("devel+")
	b.WriteString(revision[:min(12, len(revision))])
	if dirty {
		b.WriteString("-dirty")
	}
	return b.String()
}
