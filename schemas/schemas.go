// Package schemas holds the JSON Schemas of the bundled tools, embedded in
// the binary so that `go run ./cmd/gateway` needs no files on disk. Each
// file is <tool name>.json.
package schemas

import (
	"embed"
	"encoding/json"
	"fmt"
)

// FS holds every bundled schema file.
//
//go:embed *.json
var FS embed.FS

// Load returns the schema of the bundled tool called name.
func Load(name string) (json.RawMessage, error) {
	b, err := FS.ReadFile(name + ".json")
	if err != nil {
		return nil, fmt.Errorf("bundled schema for tool %q: %w", name, err)
	}
	return b, nil
}
