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
	want := map[string]int{}
	waitFor(t, func() bool {
		r := adminRequest(t, http.MethodGet, "http://"+g.addr+"/admin/v1/receipts?tenant=anonymous&event=executed", "")
		want = map[string]int{}
		for _, line := range strings.Split(strings.TrimSpace(string(r.body)), "\n") {
			var rc receipts.Receipt
			if json.Unmarshal([]byte(line), &rc) == nil && rc.Observe != "" && !strings.Contains(line, `"status":200`) {
				want[rc.Observe]++
			}
		}
		return want["allow"]+want["deny"] == 5
	})
	g.cancel()
	err := <-g.done
	g.done <- err

	newConfig := writeConfig(t, store+rules) // the same rules, enforced
	var out bytes.Buffer
	if err := Run(context.Background(), []string{"gateway", "policy", "replay", "-config", newConfig, "-since", "1h", "-json"}, func(string) string { return "" }, &out); err != nil {
		t.Fatalf("policy replay: %v\n%s", err, out.String())
	}
	var report ReplayReport
	if err := json.Unmarshal(out.Bytes(), &report); err != nil || len(report.Tools) != 1 {
		t.Fatalf("report: %v\n%s", err, out.String())
	}
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
	out.Reset()
	if err := Run(context.Background(), []string{"gateway", "policy", "replay", "-config", newConfig, "-since", "1h"}, func(string) string { return "" }, &out); err != nil || !strings.Contains(out.String(), "1: COMPLETED") {
		t.Fatalf("policy replay text: %v\n%s", err, out.String())
	}
	t.Log(out.String())
}
