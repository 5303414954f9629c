package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestPluginsDocShowsFilesThatBuild keeps docs/plugins.md honest: every Go
// block in it is a verbatim excerpt of this module's files (which the
// other tests build and run) or, for the interface it quotes, of
// tools/tool.go without its comments. A snippet that drifts from the code,
// or names something the code does not define, fails here.
func TestPluginsDocShowsFilesThatBuild(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "plugins.md"))
	if err != nil {
		t.Fatal(err)
	}
	var sources []string
	for _, name := range []string{"main.go", "ticket/ticket.go", "ticket/tracker.go", "ticket/ticket_test.go"} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		sources = append(sources, string(b))
	}
	// The transactional example lives in the gateway's module.
	orders, err := os.ReadFile(filepath.Join("..", "orders", "orders.go"))
	if err != nil {
		t.Fatal(err)
	}
	sources = append(sources, string(orders))
	toolGo, err := os.ReadFile(filepath.Join("..", "..", "tools", "tool.go"))
	if err != nil {
		t.Fatal(err)
	}
	var uncommented []string
	for _, line := range strings.Split(string(toolGo), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "//") {
			uncommented = append(uncommented, line)
		}
	}
	sources = append(sources, strings.Join(uncommented, "\n"))

	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	if len(blocks) < 3 {
		t.Fatalf("found %d Go blocks in docs/plugins.md", len(blocks))
	}
	for _, b := range blocks {
		found := false
		for _, src := range sources {
			if strings.Contains(src, b[1]) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("docs/plugins.md shows code that is in no file of the example:\n%s", b[1])
		}
	}
}
