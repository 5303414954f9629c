package eino_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestApprovalInterruptsTheRunAndResumesOnce: a call the gateway's decide
// rules hold for the operator is an Eino interrupt carrying the approval;
// the agent process, paused there, is killed with SIGKILL; the operator
// decides through the admin API; a new process resumes the thread from its
// checkpoint: approved, the call ran once; denied, never, and the model
// read the refusal.
func TestApprovalInterruptsTheRunAndResumesOnce(t *testing.T) {
	const adminToken = "eino-approvals-admin"
	sum := sha256.Sum256([]byte(adminToken))
	upstream := &countingUpstream{}
	gatewayURL := startGatewayWith(t, upstream,
		"    decide:\n      - decision: approve\n        reason: ops approves every provision\n",
		"admin:\n  token_sha256: "+hex.EncodeToString(sum[:])+"\n")
	checkpoints := t.TempDir()
	agent := func(thread string, script ...[]string) agentConfig {
		return agentConfig{Gateway: gatewayURL, CheckpointDir: checkpoints, Thread: thread, Script: script}
	}
	decide := func(t *testing.T, id, decision string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost,
			fmt.Sprintf("%s/admin/v1/approvals/%s/%s", gatewayURL, id, decision), strings.NewReader(`{"by":"ops@example","note":"not this one"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+adminToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: %s", decision, id, resp.Status)
		}
	}

	t.Run("approved by the operator after a kill -9: one execution", func(t *testing.T) {
		config := agent("approve-1", []string{"big-1"})
		first := startAgent(t, config)
		id := first.waitLine(t, lineApproval)
		first.kill(t)
		checkExecutions(t, upstream, "approve-1")

		// Resumed before the operator decided: the run interrupts again at the same approval.
		early := startAgent(t, config)
		if again := early.waitLine(t, lineApproval); again != id {
			t.Errorf("resumed before the decision: approval %s, want %s", again, id)
		}
		early.kill(t)
		checkExecutions(t, upstream, "approve-1")

		decide(t, id, "approve")
		results := startAgent(t, config).finish(t)
		checkExecutions(t, upstream, "approve-1", execution{Session: "approve-1", Step: 0, Name: "big-1"})
		if len(results) != 1 || !strings.Contains(results[0], `"resource":"big-1"`) {
			t.Errorf("the model saw %q", results)
		}
	})

	t.Run("denied by the operator: never runs, the model reads the refusal", func(t *testing.T) {
		config := agent("deny-1", []string{"big-2"})
		first := startAgent(t, config)
		id := first.waitLine(t, lineApproval)
		first.kill(t)
		decide(t, id, "deny")
		results := startAgent(t, config).finish(t)
		checkExecutions(t, upstream, "deny-1")
		want := "This call of provision was NOT run: it was denied by token:admin: not this one"
		if len(results) != 1 || !strings.HasPrefix(results[0], want) {
			t.Errorf("the model saw %q", results)
		}
	})
}
