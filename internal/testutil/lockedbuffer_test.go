package testutil

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// TestLockedBufferKeepsEveryLine: lines logged from many goroutines at
// once all arrive whole, and JSONLines and Find read them back.
func TestLockedBufferKeepsEveryLine(t *testing.T) {
	var b LockedBuffer
	log := slog.New(slog.NewJSONHandler(&b, nil))
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			for j := range 10 {
				log.Info("line", "writer", i, "n", j)
				_ = b.String() // reading while others write
			}
		})
	}
	wg.Wait()
	log.Info("done", "addr", "127.0.0.1:1")
	_, _ = b.Write([]byte("not json\n"))

	lines := b.JSONLines()
	if len(lines) != 201 {
		t.Fatalf("%d JSON lines, want 201", len(lines))
	}
	seen := map[string]bool{}
	for _, l := range lines[:200] {
		seen[fmt.Sprint(l["writer"], "/", l["n"])] = true
	}
	if len(seen) != 200 {
		t.Errorf("%d distinct lines, want 200 (one per writer and n)", len(seen))
	}
	if got := b.Find("done"); got["addr"] != "127.0.0.1:1" {
		t.Errorf("Find(done) = %v", got)
	}
	if got := b.Find("absent"); got != nil {
		t.Errorf("Find(absent) = %v, want nil", got)
	}
	if s := b.String(); strings.Count(s, "\n") != 202 || !strings.HasSuffix(s, "not json\n") {
		t.Errorf("String has %d lines, want 202 ending with the non-JSON one", strings.Count(s, "\n"))
	}
}
