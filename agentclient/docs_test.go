package agentclient_test

import (
	"bytes"
	"context"
	"errors"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/toolgateway/toolgateway/agentclient"
	"github.com/toolgateway/toolgateway/wire"
)

// goBlocks returns the ```go blocks of a Markdown text.
func goBlocks(markdown string) []string {
	return regexp.MustCompile("(?s)```go\n(.*?)```").FindAllString(markdown, -1)
}

// codeLines splits code into lines with whitespace runs collapsed and
// empty lines dropped, so gofmt's alignment and indentation do not matter.
func codeLines(code string) []string {
	var lines []string
	for _, line := range strings.Split(code, "\n") {
		if line = strings.Join(strings.Fields(line), " "); line != "" && !strings.HasPrefix(line, "```") {
			lines = append(lines, line)
		}
	}
	return lines
}

// containsRun reports whether want appears as consecutive lines of have.
func containsRun(have, want []string) bool {
	for i := 0; i+len(want) <= len(have); i++ {
		if strings.Join(have[i:i+len(want)], "\n") == strings.Join(want, "\n") {
			return true
		}
	}
	return false
}

// TestDocSnippetsAreTestedCode: every Go snippet of the README's SDK section,
// of docs/keys.md and of docs/mcp.md's "A Go runtime" section is, line for line, code of this package's examples or
// tests, so it compiles and runs (the examples' gatewayURL reads as the
// default address in the docs).
func TestDocSnippetsAreTestedCode(t *testing.T) {
	var tested []string
	for _, file := range []string{"example_test.go", "docs_test.go"} {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		tested = append(tested, codeLines(strings.ReplaceAll(string(text), "gatewayURL", `"http://127.0.0.1:8080"`))...)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	start := strings.Index(string(readme), "\n## SDKs")
	if start < 0 {
		t.Fatal(`README.md has no "## SDKs" section`)
	}
	section, _, _ := strings.Cut(string(readme)[start:], "\n## Configuration")
	keys, err := os.ReadFile("../docs/keys.md")
	if err != nil {
		t.Fatal(err)
	}
	mcpDoc, err := os.ReadFile("../docs/mcp.md")
	if err != nil {
		t.Fatal(err)
	}
	start = strings.Index(string(mcpDoc), "\n### A Go runtime")
	if start < 0 {
		t.Fatal(`docs/mcp.md has no "### A Go runtime" section`)
	}
	goRuntime, _, _ := strings.Cut(string(mcpDoc)[start+1:], "\n#")
	snippets := map[string][]string{"README.md": goBlocks(section), "docs/keys.md": goBlocks(string(keys)), "docs/mcp.md": goBlocks(goRuntime)}
	if len(snippets["README.md"]) != 1 || len(snippets["docs/keys.md"]) != 2 || len(snippets["docs/mcp.md"]) != 1 {
		t.Fatalf("found %d Go snippets in the README's SDK section, %d in docs/keys.md and %d in docs/mcp.md's Go runtime section; this test expects 1, 2 and 1",
			len(snippets["README.md"]), len(snippets["docs/keys.md"]), len(snippets["docs/mcp.md"]))
	}
	for doc, blocks := range snippets {
		for _, block := range blocks {
			if !containsRun(tested, codeLines(block)) {
				t.Errorf("this snippet of %s is not code of agentclient's examples or tests:\n%s", doc, block)
			}
		}
	}
}

// TestKeyMismatchSnippet runs docs/keys.md's snippet on the answer a
// gateway gives a client that hashed 1.0 instead of 1.
func TestKeyMismatchSnippet(t *testing.T) {
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", wire.MediaTypeProblem)
		w.WriteHeader(http.StatusUnprocessableEntity)
		w.Write([]byte(`{"type":"urn:toolgateway:problem:idempotency_key_mismatch","title":"Idempotency-Key does not match the derived key",` +
			`"status":422,"code":"idempotency_key_mismatch","retryable":false,` +
			`"expected_key":"9c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c1d","canonical_arguments":"{\"cpus\":1}"}`))
	}))
	defer server.Close()
	var logged bytes.Buffer
	log.SetOutput(&logged)
	defer log.SetOutput(os.Stderr)

	_, err := agentclient.New(server.URL).Session("run-1").Call(context.Background(), 0, "provision-infra", map[string]any{"cpus": 1.0})
	var perr *agentclient.Error
	if errors.As(err, &perr) && perr.Code == wire.CodeIdempotencyKeyMismatch {
		log.Printf("the gateway derived key %.8s… from %s", perr.ExpectedKey, perr.CanonicalArguments)
	}

	if !strings.HasSuffix(logged.String(), "the gateway derived key 9c1d2e3f… from {\"cpus\":1}\n") {
		t.Errorf("logged %q", logged.String())
	}
}
