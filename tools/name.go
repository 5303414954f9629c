package tools

import (
	"fmt"

	"github.com/toolgateway/toolgateway/keyderive"
)

// NamePattern is the pattern every tool name matches; the name is the {tool}
// segment of POST /api/tools/v1/{tool}. It is for messages: the rule itself
// is keyderive.ValidateToolName, the one check the key derivation, the
// registry and the config all share.
const NamePattern = keyderive.ToolNamePattern

// ValidName reports whether name can be a tool name.
func ValidName(name string) bool {
	return keyderive.ValidateToolName(name) == nil
}

// ReservedName is a name that matches NamePattern but that no tool may
// take: the gateway serves its own endpoints under
// /api/tools/v1/approvals/ (a caller deciding its approvals), and a tool
// of that name would share the path with them.
const ReservedName = "approvals"

// CheckReserved refuses ReservedName, saying why; any other name passes.
func CheckReserved(name string) error {
	if name == ReservedName {
		return fmt.Errorf("tool %q: the name is reserved (the gateway serves /api/tools/v1/%s/{id}/approve): choose another name", name, ReservedName)
	}
	return nil
}

// checkName returns an error naming the tool when name is not a valid tool
// name, or is reserved, so start-up failures point at the culprit.
func checkName(name string) error {
	if !ValidName(name) {
		return fmt.Errorf("tool %q: invalid name: must match %s", name, NamePattern)
	}
	return CheckReserved(name)
}
