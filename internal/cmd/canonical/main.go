// Command canonical prints the RFC 8785 canonical form that keyderive
// computes for each JSON text it reads, one per line, so that the Python and
// TypeScript SDKs can test their canonicalization differentially against the
// Go implementation on thousands of generated documents in one process.
//
// Input: one JSON text per line. Output: one JSON object per input line,
// {"canonical": "<text>"} or {"error": "<message>"} when keyderive refuses it.
//
//	go run ./internal/cmd/canonical < docs.jsonl
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"

	"github.com/toolgateway/toolgateway/keyderive"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "canonical:", err)
		os.Exit(1)
	}
}

type answer struct {
	Canonical *string `json:"canonical,omitempty"`
	Error     string  `json:"error,omitempty"`
}

func run() error {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 0, 1<<20), 64<<20)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	for in.Scan() {
		var a answer
		canonical, err := keyderive.Canonicalize(in.Bytes())
		if err != nil {
			a.Error = err.Error()
		} else {
			text := string(canonical)
			a.Canonical = &text
		}
		if err := enc.Encode(a); err != nil {
			return fmt.Errorf("write answer: %w", err)
		}
	}
	if err := in.Err(); err != nil {
		return fmt.Errorf("read input: %w", err)
	}
	return nil
}
