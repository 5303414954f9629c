package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/keyderive"
	"github.com/toolgateway/toolgateway/wire"
)

// TestSigtermDrainShorterThanTheCall sends a real SIGTERM to a gateway
// process whose drain_timeout is shorter than two calls in flight to a
// slow HTTP upstream. The drain cancels both: the lease_expiry: unknown
// tool's record stays UNKNOWN (its answer, 500, is not retryable; a retry
// on the restarted gateway is 409 outcome_unknown) and
// its upstream ran once; the rerun tool's record is released and its retry
// runs again. Executions are counted at the upstream.
func TestSigtermDrainShorterThanTheCall(t *testing.T) {
	var mu sync.Mutex
	runs := map[string]int{}
	var inflight sync.WaitGroup
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inflight.Add(1)
		defer inflight.Done()
		mu.Lock()
		runs[r.URL.Path]++
		mu.Unlock()
		time.Sleep(2 * time.Second) // the side effect takes its time, caller or not
		_, _ = w.Write([]byte(`{"done":true}`))
	}))
	t.Cleanup(func() { inflight.Wait(); upstream.Close() })
	ran := func(tool string) int {
		mu.Lock()
		defer mu.Unlock()
		return runs["/"+tool]
	}

	dir := t.TempDir()
	config := filepath.Join(dir, "gateway.yaml")
	yaml := "store:\n  path: data/gw.db\ndrain_timeout: 300ms\ntools:\n" +
		"  - name: pay\n    lease_expiry: unknown\n    http:\n      url: " + upstream.URL + "/pay\n" +
		"  - name: provision\n    http:\n      url: " + upstream.URL + "/provision\n"
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	first := startProcess(t, "-config", config)
	type answer struct {
		status int
		body   []byte
		err    error
	}
	answers := map[string]chan answer{"pay": make(chan answer, 1), "provision": make(chan answer, 1)}
	steps := map[string]uint64{"pay": 1, "provision": 2}
	for tool, ch := range answers {
		go func() {
			step := strconv.FormatUint(steps[tool], 10)
			key, _ := keyderive.Key("drain", steps[tool], tool, []byte(`{}`))
			req, _ := http.NewRequest(http.MethodPost, "http://"+first.addr+"/api/tools/v1/"+tool, strings.NewReader(`{}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", key)
			req.Header.Set("Agent-Session-Id", "drain")
			req.Header.Set("Agent-Step-Index", step)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				ch <- answer{err: err}
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			ch <- answer{status: resp.StatusCode, body: body}
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for ran("pay") == 0 || ran("provision") == 0 {
		if time.Now().After(deadline) {
			for tool, ch := range answers {
				select {
				case a := <-ch:
					t.Logf("%s answered %d %s %v", tool, a.status, a.body, a.err)
				default:
				}
			}
			t.Fatal("the calls did not reach the upstream")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := first.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = first.cmd.Wait() // a drain that ran out of time exits non-zero or zero; either way it is gone
	for tool, retryable := range map[string]bool{"pay": false, "provision": true} {
		a := <-answers[tool]
		if a.err != nil {
			t.Fatalf("%s: no answer before the process exited: %v", tool, a.err)
		}
		var p struct {
			Code      string `json:"code"`
			Retryable bool   `json:"retryable"`
		}
		if err := json.Unmarshal(a.body, &p); err != nil || a.status != http.StatusInternalServerError || p.Code != wire.CodeToolFailed || p.Retryable != retryable {
			t.Fatalf("%s cancelled by the drain answered %d %s; want 500 tool_failed, retryable %v", tool, a.status, a.body, retryable)
		}
	}

	second := startProcess(t, "-config", config)
	status, _, body := second.call(t, "drain", 1, "pay", `{}`)
	if status != http.StatusConflict || !strings.Contains(string(body), wire.CodeOutcomeUnknown) {
		t.Fatalf("retry of the unknown tool after the drain: %d %s, want 409 outcome_unknown", status, body)
	}
	status, _, body = second.call(t, "drain", 2, "provision", `{}`)
	if status != http.StatusOK {
		t.Fatalf("retry of the rerun tool after the drain: %d %s, want 200 (run again)", status, body)
	}
	inflight.Wait()
	if n := ran("pay"); n != 1 {
		t.Fatalf("the unknown tool's upstream ran %d times, want 1", n)
	}
	if n := ran("provision"); n != 2 {
		t.Fatalf("the rerun tool's upstream ran %d times, want 2", n)
	}
}
