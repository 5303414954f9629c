package gatewaycmd

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/keyderive"
)

// TestCheckRefusesBadDecideRules: `gateway check` and start-up refuse a
// rule that does not compile or is not boolean, naming the tool's field,
// the tool, the rule's index and CEL's message; and a bad mode or an
// approvals.notify without its secret.
func TestCheckRefusesBadDecideRules(t *testing.T) {
	dir := t.TempDir()
	base := "listen: 127.0.0.1:0\nstore:\n  path: " + filepath.Join(dir, "gw.db") + "\n"
	tool := func(rules string) string {
		return base + "tools:\n  - name: refund\n    http:\n      url: http://127.0.0.1:1/refund\n    decide:\n" + rules
	}
	cases := []struct {
		name, config string
		errorHas     []string
	}{
		{"does not compile", tool("      - when: \"args.amount <=\"\n        decision: allow\n"),
			[]string{"tools[0].decide", `tool "refund"`, "decide[0]", "Syntax error"}},
		{"not boolean", tool("      - decision: allow\n        when: \"args.amount <= 1\"\n      - when: \"args.amount + 1\"\n        decision: deny\n"),
			[]string{"tools[0].decide", "decide[1]", "want bool"}},
		{"unknown decision", tool("      - decision: maybe\n"), []string{"decide[0]", "unknown decision"}},
		{"approvers do not compile", tool("      - decision: approve\n        approvers: '\"finance\" in claims.groups +'\n"),
			[]string{"tools[0].decide", "decide[0]", "approvers", "Syntax error"}},
		{"approvers not boolean", tool("      - decision: approve\n        approvers: 'principal'\n"),
			[]string{"tools[0].decide", "decide[0]", "approvers", "want bool"}},
		{"quorum above the approvers", tool("      - decision: approve\n        approvers: [oidc:idp.example:ada]\n        quorum: 2\n"),
			[]string{"decide[0]", "quorum 2 is larger than the 1 approvers listed"}},
		{"bad mode", base + "mode: dryrun\n", []string{"mode", "dryrun"}},
		{"notify without its secret", base + "approvals:\n  notify:\n    url: https://hooks.example.com/a\n    secret_env: GW_NOTIFY_SECRET_UNSET\n",
			[]string{"approvals.notify.secret_env", "GW_NOTIFY_SECRET_UNSET"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := writeConfig(t, c.config)
			var out strings.Builder
			checkErr := RunIO(context.Background(), []string{"gateway", "check", "-config", path}, envOf(nil), strings.NewReader(""), &out)
			for _, want := range c.errorHas {
				if checkErr == nil || !strings.Contains(checkErr.Error(), want) {
					t.Fatalf("check: %v, want an error naming %q", checkErr, want)
				}
			}
			startErr := Run(context.Background(), []string{"gateway", "-config", path}, envOf(nil), &strings.Builder{})
			if startErr == nil || "check: "+startErr.Error() != checkErr.Error() {
				t.Fatalf("start-up: %v, want check's error %v", startErr, checkErr)
			}
		})
	}
}

// countingUpstream is an HTTP tool that counts its executions and takes
// delay to answer.
func countingUpstream(t *testing.T, delay time.Duration) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		time.Sleep(delay)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"refunded":true}`))
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// TestApprovedCallSurvivesKills runs the real program on each store: a
// call waits for approval, an operator approves it (admin API), the
// gateway is SIGKILLed before the call comes back and again while the
// consuming call runs; the upstream runs the call at most once
// (lease_expiry: unknown: the record of the killed run turns UNKNOWN, it
// never runs again).
func TestApprovedCallSurvivesKills(t *testing.T) {
	bin := buildGateway(t)
	// The single-node stores (Redis Cluster is not covered here).
	stores := killTestStores("approvalkill")
	delete(stores, "redis-cluster")
	for name, storeSection := range stores {
		t.Run(name, func(t *testing.T) { approvedCallSurvivesKills(t, bin, storeSection(t)) })
	}
}

func approvedCallSurvivesKills(t *testing.T, bin, storeSection string) {
	up, runs := countingUpstream(t, 1500*time.Millisecond)
	addr := freeAddr(t)
	const adminToken = "approval-kill-admin"
	config := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(config, []byte("listen: "+addr+"\n"+storeSection+`admin:
  token_sha256: `+tokenHash(adminToken)+`
idempotency:
  lock_ttl: 1s
tools:
  - name: refund
    lease_expiry: unknown
    http:
      url: `+up.URL+`
    decide:
      - when: "args.amount <= 100"
        decision: allow
      - decision: approve
        reason: "finance approves"
`), 0o600); err != nil {
		t.Fatal(err)
	}
	const session, step, args = "kill", 1, `{"amount":900}`

	first := startReplica(t, bin, config, addr)
	r, err := refundCall(addr, session, step, args, "")
	var p struct {
		Code       string `json:"code"`
		ApprovalID string `json:"approval_id"`
	}
	if err != nil || json.Unmarshal(r.body, &p) != nil || r.status != http.StatusConflict || p.Code != "approval_pending" {
		t.Fatalf("first call: %v %d %s", err, r.status, r.body)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/admin/v1/approvals/"+p.ApprovalID+"/approve", strings.NewReader(`{"by":"ops"}`))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/json")
	if resp := do(t, req); resp.status != http.StatusOK {
		t.Fatalf("approve: %d %s", resp.status, resp.body)
	}
	first.kill() // between the approval and the call that uses it

	second := startReplica(t, bin, config, addr)
	go func() { _, _ = refundCall(addr, session, step, args, "") }() // its gateway dies under it
	waitFor(t, func() bool { return runs.Load() == 1 })
	second.kill() // while the consuming call runs

	startReplica(t, bin, config, addr)
	for range 2 {
		// Waits out the killed run's lease, then the record is UNKNOWN.
		r, err = refundCall(addr, session, step, args, "wait=10")
		if err != nil || r.status != http.StatusConflict || !strings.Contains(string(r.body), "outcome_unknown") {
			t.Fatalf("after the kill: %v %d %s, want 409 outcome_unknown", err, r.status, r.body)
		}
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the upstream ran the approved call %d times, want 1", n)
	}
}

// refundCall sends one keyed refund call (with a Prefer header unless
// prefer is ""); an error is the connection's, not the test's: a call
// whose gateway is killed under it has none to give.
func refundCall(addr, session string, step uint64, args, prefer string) (reply, error) {
	key, err := keyderive.Key(session, step, "refund", []byte(args))
	if err != nil {
		return reply{}, err
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/api/tools/v1/refund", strings.NewReader(args))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Agent-Session-Id", session)
	req.Header.Set("Agent-Step-Index", itoa(step))
	if prefer != "" {
		req.Header.Set("Prefer", prefer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: body}, err
}

// TestReloadChangesDecideRulesAndMode: SIGHUP applies new decide rules and
// mode to the next call, names them in its log line, and a broken rule
// refuses the whole file naming it.
func TestReloadChangesDecideRulesAndMode(t *testing.T) {
	base := storeSection(t) + "tools:\n  - name: reloadtest\n    decide:\n"
	g := startReloading(t, base+"      - decision: deny\n        reason: closed\n")
	if st, _, body := callAs(t, g.addr, "", "r", 1, "reloadtest", `{}`); st != http.StatusForbidden || !strings.Contains(string(body), "call_denied") {
		t.Fatalf("before: %d %s, want 403 call_denied", st, body)
	}
	line := g.reload(t, base+"      - when: \"tenant == 'anonymous'\"\n        decision: allow\n      - decision: deny\n")
	if changed := strings.Join(strs(line["changed"]), ","); line["msg"] != "config reloaded" || changed != "tools[reloadtest].decide" {
		t.Fatalf("reload: %v", line)
	}
	if st, _, body := callAs(t, g.addr, "", "r", 2, "reloadtest", `{}`); st != http.StatusOK {
		t.Fatalf("after: %d %s, want 200", st, body)
	}
	line = g.reload(t, base+"      - when: \"args.n +\"\n        decision: allow\n")
	if line["msg"] == "config reloaded" || !strings.Contains(line["error"].(string), "tools[0].decide") {
		t.Fatalf("broken rule: %v, want a refusal naming tools[0].decide", line)
	}
	line = g.reload(t, "mode: observe\n"+base+"      - decision: deny\n")
	if changed := strings.Join(strs(line["changed"]), ","); changed != "mode,tools[reloadtest].decide" {
		t.Fatalf("reload to observe: %v", line)
	}
	if st, _, body := callAs(t, g.addr, "", "r", 3, "reloadtest", `{}`); st != http.StatusOK {
		t.Fatalf("observe mode: %d %s, want the call to run", st, body)
	}
}
