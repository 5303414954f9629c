package gatewaycmd

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/toolgateway/toolgateway/gateway/receipts"
)

// TestPolicyReplayMatchesObserveMode: a gateway in observe mode runs calls
// of a refund tool whose rule would deny amounts over 100, and reports in
// each executed receipt what an enforcing gateway would have decided. The
// upstream answers 500 to them, so their records stay UNKNOWN with their
// arguments (lease_expiry: unknown); one call completes (and loses its
// arguments). `gateway policy replay` of the same rules, enforced, on that
// store counts exactly what observe mode reported, and names the
// completed call as not replayable with the reason.
func TestPolicyReplayMatchesObserveMode(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		if !strings.Contains(string(body), `"complete":true`) {
			w.WriteHeader(http.StatusInternalServerError) // an uncertain outcome: the record stays UNKNOWN
		}
		_, _ = w.Write([]byte(`{}`))
	}))
	t.Cleanup(up.Close)
	store := "store:\n  path: " + filepath.Join(t.TempDir(), "gw.db") + "\n"
	rules := `tools:
  - name: refund
    lease_expiry: unknown
    http:
      url: ` + up.URL + `
    decide:
      - when: "args.amount > 100"
        decision: deny
        reason: "refunds above 100 are not an agent's call"
      - decision: allow
`
	observed := "listen: 127.0.0.1:0\n" + store + "admin:\n  token_sha256: " + tokenHash(pinsAdminToken) + "\nmode: observe\n" + rules
	g := startGateway(t, observed)
	for i, args := range []string{`{"amount":50}`, `{"amount":150}`, `{"amount":300}`, `{"amount":20}`, `{"amount":101}`, `{"amount":5,"complete":true}`} {
		if r := keyedCall(t, g.addr, "replay", uint64(i), "refund", args); r.status == 0 {
			t.Fatalf("call %s: no answer", args)
		}
	}
	want := observedDecisions(t, g, 5, func(line string) bool { return !strings.Contains(line, `"status":200`) })

	newConfig := writeConfig(t, store+rules) // the same rules, enforced
	report := replayJSON(t, newConfig)
	got := report.Tools[0]
	if got.Allowed != want["allow"] || got.Denied != want["deny"] || got.Approval != 0 || got.Replayed != 5 {
		t.Fatalf("replay: allowed %d, denied %d, approval %d of %d; observe mode reported %v", got.Allowed, got.Denied, got.Approval, got.Replayed, want)
	}
	if want["deny"] != 3 || got.NotReplayable != 1 || report.NotReplayable[notReplayableCompleted] != 1 || got.OverBudget != "N/A" {
		t.Fatalf("replay: %+v, not replayable %v; want 3 denied, the completed call not replayable", got, report.NotReplayable)
	}
	if ex := got.Examples["deny"]; len(ex) == 0 || !strings.Contains(ex[0].Reason, "above 100") || ex[0].Rule != "decide[0]" {
		t.Fatalf("deny examples: %+v", ex)
	}
	var out bytes.Buffer
	if err := Run(context.Background(), []string{"gateway", "policy", "replay", "-config", newConfig, "-since", "1h"}, func(string) string { return "" }, &out); err != nil || !strings.Contains(out.String(), "1: COMPLETED") {
		t.Fatalf("policy replay text: %v\n%s", err, out.String())
	}
	t.Log(out.String())
}

// TestPolicyReplayOfCompletedCallsMatchesObserveMode: with
// idempotency.keep_arguments on, calls that COMPLETED keep their
// arguments, so `gateway policy replay` evaluates them too. A gateway in
// observe mode runs six refund calls (the upstream answers 200 to each,
// and counts them: each ran once) under a rule that would deny amounts
// over 100; the replay of the same rules, enforced, on that store counts
// per decision exactly what observe mode reported in the executed
// receipts, with no call left unreplayable. On each store.
func TestPolicyReplayOfCompletedCallsMatchesObserveMode(t *testing.T) {
	// The single-node stores (Redis Cluster is not covered here).
	stores := killTestStores("replayargs")
	delete(stores, "redis-cluster")
	for name, storeSection := range stores {
		t.Run(name, func(t *testing.T) { replayCompletedCalls(t, storeSection(t)) })
	}
}

func replayCompletedCalls(t *testing.T, store string) {
	var ran atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"refunded":true}`))
	}))
	t.Cleanup(up.Close)
	rules := `tools:
  - name: refund
    http:
      url: ` + up.URL + `
    decide:
      - when: "args.amount > 100"
        decision: deny
        reason: "refunds above 100 are not an agent's call"
      - decision: allow
`
	observed := "listen: 127.0.0.1:0\n" + store + "idempotency:\n  keep_arguments: true\nadmin:\n  token_sha256: " + tokenHash(pinsAdminToken) + "\nmode: observe\n" + rules
	g := startGateway(t, observed)
	calls := []string{`{"amount":50}`, `{"amount":150}`, `{"amount":300}`, `{"amount":20}`, `{"amount":101}`, `{"amount":100}`}
	for i, args := range calls {
		if r := keyedCall(t, g.addr, "replay-completed", uint64(i), "refund", args); r.status != http.StatusOK {
			t.Fatalf("call %s: status %d %s", args, r.status, r.body)
		}
	}
	want := observedDecisions(t, g, len(calls), func(string) bool { return true })
	if n := ran.Load(); n != int64(len(calls)) {
		t.Fatalf("the upstream ran %d calls, want %d", n, len(calls))
	}

	newConfig := writeConfig(t, store+rules) // the same rules, enforced
	report := replayJSON(t, newConfig)
	got := report.Tools[0]
	if got.Replayed != len(calls) || got.NotReplayable != 0 || len(report.NotReplayable) != 0 {
		t.Fatalf("replay: %d replayed, %d not replayable (%v); want all %d completed calls replayed", got.Replayed, got.NotReplayable, report.NotReplayable, len(calls))
	}
	if want["deny"] != 3 || got.Allowed != want["allow"] || got.Denied != want["deny"] || got.Approval != 0 {
		t.Fatalf("replay: allowed %d, denied %d, approval %d; observe mode reported %v (want 3 denied)", got.Allowed, got.Denied, got.Approval, want)
	}
	if ex := got.Examples["deny"]; len(ex) == 0 || ex[0].State != "COMPLETED" || !strings.Contains(ex[0].Reason, "above 100") {
		t.Fatalf("deny examples: %+v", ex)
	}
}

// TestKeepArgumentsReloads: idempotency.keep_arguments reloads with
// SIGHUP, and applies to calls claimed afterwards: of two calls completed
// one before and one after turning it on, `gateway policy replay`
// evaluates the second only and names the first not replayable.
func TestKeepArgumentsReloads(t *testing.T) {
	base := storeSection(t) + "mode: observe\n" // the calls run; replay reads the rules as enforced
	tool := "tools:\n  - name: reloadtest\n    decide:\n      - when: \"args.amount > 100\"\n        decision: deny\n      - decision: allow\n"
	g := startReloading(t, base+tool)
	if st, _, body := callAs(t, g.addr, "", "keep", 1, "reloadtest", `{"amount":500}`); st != http.StatusOK {
		t.Fatalf("call before the reload: %d %s", st, body)
	}
	line := g.reload(t, base+"idempotency:\n  keep_arguments: true\n"+tool)
	if line["msg"] != "config reloaded" || !strings.Contains(strings.Join(strs(line["changed"]), ","), "idempotency.keep_arguments") {
		t.Fatalf("reload: %v", line)
	}
	if st, _, body := callAs(t, g.addr, "", "keep", 2, "reloadtest", `{"amount":700}`); st != http.StatusOK {
		t.Fatalf("call after the reload: %d %s", st, body)
	}
	g.cancel()
	err := <-g.done
	g.done <- err

	report := replayJSON(t, g.path)
	got := report.Tools[0]
	if got.Replayed != 1 || got.Denied != 1 || got.NotReplayable != 1 || report.NotReplayable[notReplayableCompleted] != 1 {
		t.Fatalf("replay: %+v, not replayable %v; want the call after the reload replayed (denied), the one before not", got, report.NotReplayable)
	}
	if ex := got.Examples["deny"]; len(ex) != 1 || ex[0].Arguments != `{"amount":700}` {
		t.Fatalf("deny examples: %+v", ex)
	}
}

// observedDecisions stops g, a gateway in observe mode, once its executed
// receipts that count (per counts, given the receipt's JSON line) report n
// decisions, and returns them per decision ("allow", "deny", …).
func observedDecisions(t *testing.T, g *started, n int, counts func(line string) bool) map[string]int {
	t.Helper()
	want := map[string]int{}
	waitFor(t, func() bool {
		r := adminRequest(t, http.MethodGet, "http://"+g.addr+"/admin/v1/receipts?tenant=anonymous&event=executed", "")
		want = map[string]int{}
		for _, line := range strings.Split(strings.TrimSpace(string(r.body)), "\n") {
			var rc receipts.Receipt
			if json.Unmarshal([]byte(line), &rc) == nil && rc.Observe != "" && counts(line) {
				want[rc.Observe]++
			}
		}
		return want["allow"]+want["deny"] == n
	})
	g.cancel()
	err := <-g.done
	g.done <- err
	return want
}

// replayJSON runs `gateway policy replay -json` of config over the last
// hour and returns its report, which must name one tool.
func replayJSON(t *testing.T, config string) ReplayReport {
	t.Helper()
	var out bytes.Buffer
	if err := Run(context.Background(), []string{"gateway", "policy", "replay", "-config", config, "-since", "1h", "-json"}, func(string) string { return "" }, &out); err != nil {
		t.Fatalf("policy replay: %v\n%s", err, out.String())
	}
	var report ReplayReport
	if err := json.Unmarshal(out.Bytes(), &report); err != nil || len(report.Tools) != 1 {
		t.Fatalf("report: %v\n%s", err, out.String())
	}
	return report
}
