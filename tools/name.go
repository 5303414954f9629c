package tools

import (
	"fmt"
	"regexp"
)

// NamePattern is the pattern every tool name matches; the name is the {tool}
// segment of POST /api/tools/v1/{tool}.
const NamePattern = `^[a-z0-9][a-z0-9_-]{0,63}$`

var namePattern = regexp.MustCompile(NamePattern)

// ValidName reports whether name can be a tool name.
func ValidName(name string) bool {
	return namePattern.MatchString(name)
}

// checkName returns an error naming the tool when name is not a valid tool
// name, so start-up failures point at the culprit.
func checkName(name string) error {
	if !ValidName(name) {
		return fmt.Errorf("tool %q: invalid name: must match %s", name, NamePattern)
	}
	return nil
}
