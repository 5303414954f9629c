package deploy_test

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestMCPHostConfigsInTheDocs: the host configurations docs/mcp.md gives
// for pointing an MCP host at the gateway (its ```json blocks and the
// inline `{...}` of its tables that hold "servers" or "mcpServers") are
// JSON the host can load, and every
// ${input:ID} a VS Code config uses has its entry under "inputs" (VS Code
// refuses the server otherwise; the trial found one without).
func TestMCPHostConfigsInTheDocs(t *testing.T) {
	doc, err := os.ReadFile("../docs/mcp.md")
	if err != nil {
		t.Fatal(err)
	}
	var snippets []string
	for _, m := range regexp.MustCompile("(?s)```json\n(.*?)```").FindAllStringSubmatch(string(doc), -1) {
		snippets = append(snippets, m[1])
	}
	for _, m := range regexp.MustCompile("`(\\{\"[^`]*\\})`").FindAllStringSubmatch(string(doc), -1) {
		snippets = append(snippets, m[1])
	}
	inputRef := regexp.MustCompile(`\$\{input:([^}]+)\}`)
	var vscode int
	for _, snippet := range snippets {
		if !strings.Contains(snippet, `"servers"`) && !strings.Contains(snippet, `"mcpServers"`) {
			continue // a protocol example, not a host's config
		}
		var config struct {
			Inputs []struct {
				ID   string `json:"id"`
				Type string `json:"type"`
			} `json:"inputs"`
		}
		if err := json.Unmarshal([]byte(snippet), &config); err != nil {
			t.Errorf("not JSON (%v):\n%s", err, snippet)
			continue
		}
		ids := map[string]bool{}
		for _, in := range config.Inputs {
			ids[in.ID] = in.Type != ""
		}
		for _, ref := range inputRef.FindAllStringSubmatch(snippet, -1) {
			vscode++
			if !ids[ref[1]] {
				t.Errorf("${input:%s} without its inputs entry (with a type):\n%s", ref[1], snippet)
			}
		}
	}
	if vscode == 0 {
		t.Error("docs/mcp.md has no VS Code config with ${input:…} any more: update this test")
	}
}
