package eino_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/toolgateway/toolgateway/internal/gatewayproc"
)

// TestDocsShowTheCrashTestedLines holds docs/runtimes-go.md to the code
// the crash test runs: every line of its first Go block (the adapter's
// lines) is a line of the agent program, whitespace aside.
func TestDocsShowTheCrashTestedLines(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(gatewayproc.RepoRoot(t), "docs", "runtimes-go.md"))
	if err != nil {
		t.Fatal(err)
	}
	agent, err := os.ReadFile("crash_test.go") // the agent program the crash test runs
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)```go\n(.*?)```").FindSubmatch(doc)
	if block == nil {
		t.Fatal("docs/runtimes-go.md has no Go block")
	}
	normalise := func(line string) string { return strings.Join(strings.Fields(line), " ") }
	agentLines := map[string]bool{}
	for _, line := range strings.Split(string(agent), "\n") {
		agentLines[normalise(line)] = true
	}
	for _, line := range strings.Split(string(block[1]), "\n") {
		if line = normalise(line); line != "" && !agentLines[line] {
			t.Errorf("docs/runtimes-go.md shows a line the crash-tested agent does not run:\n%s", line)
		}
	}
}
