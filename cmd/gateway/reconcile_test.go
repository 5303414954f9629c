package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestKillNineOfTheReconcilingReplica: a gateway asking a tool's owner
// about an UNKNOWN record is killed with SIGKILL mid-question; the
// gateway started after it on the same store asks again once the dead
// one's reconcile lease ran out (the tool's timeout + 5 s) and completes
// the record with the confirmed outcome. The tool ran once.
func TestKillNineOfTheReconcilingReplica(t *testing.T) {
	var executions, questions atomic.Int64
	hold := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/refund", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		executions.Add(1)
		select { // acted, answers after the tool's timeout
		case <-time.After(time.Second):
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("/status", func(w http.ResponseWriter, r *http.Request) {
		// Read the question whole: then the server notices the asker's
		// death (its request context ends).
		_, _ = io.Copy(io.Discard, r.Body)
		if questions.Add(1) == 1 {
			select { // the first replica never hears back
			case <-hold:
			case <-r.Context().Done():
			}
			return
		}
		_, _ = io.WriteString(w, `{"outcome":"committed","status":201,"body":{"refund":"r_9"}}`)
	})
	upstream := httptest.NewServer(mux)
	defer upstream.Close()
	defer close(hold) // before Close, which waits for the held question

	dir := t.TempDir()
	config := filepath.Join(dir, "gateway.yaml")
	text := fmt.Sprintf(`store:
  path: data/gw.db
tools:
  - name: refund
    timeout: 200ms
    lease_expiry: unknown
    http: {url: %q}
    reconcile:
      http: {url: %q}
      every: 100ms
      attempts: 5
`, upstream.URL+"/refund", upstream.URL+"/status")
	if err := os.WriteFile(config, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	args := `{"txn_id":"t9"}`
	first := startProcess(t, "-config", config)
	if status, _, body := first.call(t, "k9", 0, "refund", args); status < 500 {
		t.Fatalf("first call: %d %s; want the timeout's uncertain outcome", status, body)
	}
	waitUntil(t, 10*time.Second, func() bool { return questions.Load() == 1 })
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.cmd.Wait()
	killed := time.Now()

	second := startProcess(t, "-config", config)
	var body []byte
	waitUntil(t, 20*time.Second, func() bool {
		status, h, b := second.call(t, "k9", 0, "refund", args)
		body = b
		return status == http.StatusCreated && h.Get("Idempotent-Replayed") == "true"
	})
	if string(body) != `{"refund":"r_9"}` || executions.Load() != 1 || questions.Load() != 2 {
		t.Fatalf("replayed %s after %d executions and %d questions; want the confirmed body, 1 and 2", body, executions.Load(), questions.Load())
	}
	// The dead replica's reconcile lease (timeout + 5 s) held the record.
	if waited := time.Since(killed); waited < 4*time.Second {
		t.Fatalf("resolved %v after the kill: before the dead replica's reconcile lease ran out", waited)
	}
}

func waitUntil(t *testing.T, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
