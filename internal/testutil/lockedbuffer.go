// Package testutil holds the test doubles that tests across the module
// share.
package testutil

import (
	"bytes"
	"encoding/json"
	"sync"
)

// LockedBuffer collects output written from many goroutines (a logger's,
// a child process's), safe to read while writers are still running. The
// zero value is ready to use.
type LockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *LockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is everything written so far.
func (b *LockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// JSONLines decodes every line written so far that is a JSON object (a
// slog JSON record), in order; other lines are skipped.
func (b *LockedBuffer) JSONLines() []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for line := range bytes.Lines(b.buf.Bytes()) {
		var m map[string]any
		if json.Unmarshal(line, &m) == nil && m != nil {
			out = append(out, m)
		}
	}
	return out
}

// Find is the first JSON line whose "msg" is msg, or nil.
func (b *LockedBuffer) Find(msg string) map[string]any {
	for _, line := range b.JSONLines() {
		if line["msg"] == msg {
			return line
		}
	}
	return nil
}
