package eino_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/toolgateway/toolgateway/internal/gatewayproc"
)

// goBlocks returns the ```go blocks of docs/runtimes-go.md and the code
// they are held to: example_test.go.
func goBlocks(t *testing.T) (blocks []string, example string) {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(gatewayproc.RepoRoot(t), "docs", "runtimes-go.md"))
	if err != nil {
		t.Fatal(err)
	}
	code, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(doc), -1) {
		blocks = append(blocks, m[1])
	}
	if len(blocks) != 3 {
		t.Fatalf("docs/runtimes-go.md has %d Go blocks; this test expects 3: the adapter's lines, the whole agent, the compile options", len(blocks))
	}
	return blocks, string(code)
}

// TestDocsShowTheExample holds docs/runtimes-go.md's whole agent to
// example_test.go, which the crash test's agent runs: the block is the
// file from its imports to its end, byte for byte.
func TestDocsShowTheExample(t *testing.T) {
	blocks, example := goBlocks(t)
	start := strings.Index(example, "import (")
	if start < 0 {
		t.Fatal("example_test.go has no import block")
	}
	if got, want := strings.TrimSpace(blocks[1]), strings.TrimSpace(example[start:]); got != want {
		t.Errorf("docs/runtimes-go.md's whole agent is not example_test.go from its imports on:\n--- docs\n%s\n--- example_test.go\n%s", got, want)
	}
}

// TestDocsShowTheCrashTestedLines: every line of the adapter's lines and
// of the compile options the docs show is a line of example_test.go,
// whitespace aside.
func TestDocsShowTheCrashTestedLines(t *testing.T) {
	blocks, example := goBlocks(t)
	normalise := func(line string) string { return strings.Join(strings.Fields(line), " ") }
	exampleLines := map[string]bool{}
	for _, line := range strings.Split(example, "\n") {
		exampleLines[normalise(line)] = true
	}
	for _, block := range []string{blocks[0], blocks[2]} {
		for _, line := range strings.Split(block, "\n") {
			if line = normalise(line); line != "" && !exampleLines[line] {
				t.Errorf("docs/runtimes-go.md shows a line the crash-tested agent does not run:\n%s", line)
			}
		}
	}
}
