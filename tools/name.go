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

// checkName returns an error naming the tool when name is not a valid tool
// name, so start-up failures point at the culprit.
func checkName(name string) error {
	if !ValidName(name) {
		return fmt.Errorf("tool %q: invalid name: must match %s", name, NamePattern)
	}
	return nil
}
