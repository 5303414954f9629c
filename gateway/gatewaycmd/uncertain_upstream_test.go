package gatewaycmd

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/internal/mcptest"
	"github.com/toolgateway/toolgateway/keyderive"
	"github.com/toolgateway/toolgateway/wire"
)

// actingUpstream is an HTTP upstream that acts (counts an execution per
// Agent-Session-Id) on every call, and then, on the first call of a
// session only, fails as its arguments say: "status" answers that status
// (with Toolgateway-Outcome: not-executed when "not_executed"), "drop"
// closes the connection without an answer, "hang" answers 200 only after
// a second (past the proxy's timeout). Later calls answer 200.
type actingUpstream struct {
	mu   sync.Mutex
	runs map[string]int
}

func (u *actingUpstream) executions(session string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.runs[session]
}

func (u *actingUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var args struct {
		Status      int    `json:"status"`
		NotExecuted bool   `json:"not_executed"`
		Action      string `json:"action"`
	}
	if err := json.NewDecoder(r.Body).Decode(&args); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	session := r.Header.Get(wire.HeaderSessionID)
	u.mu.Lock()
	u.runs[session]++ // the side effect
	first := u.runs[session] == 1
	u.mu.Unlock()
	switch {
	case !first:
	case args.Action == "drop":
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close()
		}
		return
	case args.Action == "hang":
		time.Sleep(time.Second)
	case args.Status != 0:
		if args.NotExecuted {
			w.Header().Set(wire.HeaderOutcome, wire.OutcomeNotExecuted)
		}
		http.Error(w, `{"error":"upstream failed"}`, args.Status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = fmt.Fprintf(w, `{"ok":true,"run":%d}`, u.executions(session))
}

// newTimingOutProxy is a reverse proxy in front of target, as a load
// balancer would be: a backend that does not answer its headers within
// 300ms gets 504, any other failure of the backend (a dropped connection)
// 502 — both after the backend may have acted.
func newTimingOutProxy(t *testing.T, target string) *httptest.Server {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.Transport = &http.Transport{ResponseHeaderTimeout: 300 * time.Millisecond}
	proxy.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, err error) {
		var netErr net.Error
		if errors.As(err, &netErr) && netErr.Timeout() {
			w.WriteHeader(http.StatusGatewayTimeout)
			return
		}
		w.WriteHeader(http.StatusBadGateway)
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	return srv
}

// TestNoReleaseWithoutEvidence calls lease_expiry: unknown tools whose
// upstream acts and then fails — an HTTP upstream answering 500 or 503, a
// reverse proxy answering 502 or 504 after the upstream acted, a connection
// dropped after the request was written, an MCP server answering a
// JSON-RPC error or (record_is_error: false) an isError result — three
// times each through the real program, and counts
// executions at the upstream: one, the record UNKNOWN (admin API), the
// first answer not retryable and every retry 409 outcome_unknown. An
// answer marked not executed (Toolgateway-Outcome, _meta outcome) and an
// MCP protocol refusal release the call: the retry runs and succeeds. A
// lease_expiry: rerun tool runs again as before. The figures of
// docs/reliability.md's edges table come from this test's log (-v).
func TestNoReleaseWithoutEvidence(t *testing.T) {
	up := &actingUpstream{runs: map[string]int{}}
	upSrv := httptest.NewServer(up)
	t.Cleanup(upSrv.Close)
	proxy := newTimingOutProxy(t, upSrv.URL)
	mcpUp := newMCPUpstream(t)

	const adminToken = "evidence-admin-token"
	sum := sha256.Sum256([]byte(adminToken))
	g := startGateway(t, `listen: 127.0.0.1:0
store:
  path: `+filepath.Join(t.TempDir(), "gw.db")+`
admin:
  token_sha256: `+hex.EncodeToString(sum[:])+`
tools:
  - name: pay
    lease_expiry: unknown
    http:
      url: `+upSrv.URL+`
  - name: pay-proxied
    lease_expiry: unknown
    http:
      url: `+proxy.URL+`
  - name: pay-rerun
    http:
      url: `+upSrv.URL+`
mcp_servers:
  - name: payments
    url: `+mcpUp.http.URL+`
    prefix: u_
    tools: [fail_rpc]
    lease_expiry: unknown
  - name: tickets
    url: `+mcpUp.http.URL+`
    prefix: r_
    tools: [fail_rpc]
  - name: refunds
    url: `+mcpUp.http.URL+`
    prefix: v_
    tools: [fail_tool]
    record_is_error: false
    lease_expiry: unknown
`)
	waitFor(t, func() bool { return get(t, "http://"+g.addr+"/readyz").status == http.StatusOK })

	mcpExecutions := func(session string) int {
		n := 0
		for _, e := range mcptest.Filter(mcpUp.srv.All(), "", "start") {
			if e.Meta[wire.MetaSessionID] == session {
				n++
			}
		}
		return n
	}
	const (
		unknownOutcome = iota // first answer not retryable, then 409 outcome_unknown; 1 execution; UNKNOWN
		released              // first answer the failure, the retry runs and succeeds, the third replays; 2 executions; COMPLETED
	)
	cases := []struct {
		name, tool, args string
		mcp              bool
		want             int
		firstStatus      int
		firstCode        string // "" when the upstream's own answer passes through
	}{
		{"http 500 after acting", "pay", `{"status":500}`, false, unknownOutcome, 500, wire.CodeToolFailed},
		{"http 503 after acting", "pay", `{"status":503}`, false, unknownOutcome, 500, wire.CodeToolFailed},
		{"proxy 502 after the upstream acted", "pay-proxied", `{"action":"drop"}`, false, unknownOutcome, 500, wire.CodeToolFailed},
		{"proxy 504 after the upstream acted", "pay-proxied", `{"action":"hang"}`, false, unknownOutcome, 500, wire.CodeToolFailed},
		{"connection lost after the request was written", "pay", `{"action":"drop"}`, false, unknownOutcome, 502, wire.CodeUpstreamUnreachable},
		{"mcp JSON-RPC error after acting", "u_fail_rpc", `{"succeed_after":1}`, true, unknownOutcome, 502, wire.CodeUpstreamUnreachable},
		{"mcp JSON-RPC error -32603 after acting", "u_fail_rpc", `{"code":-32603,"succeed_after":1}`, true, unknownOutcome, 502, wire.CodeUpstreamUnreachable},
		{"http 500 marked not-executed", "pay", `{"status":500,"not_executed":true}`, false, released, 500, ""},
		{"http 503 marked not-executed", "pay", `{"status":503,"not_executed":true}`, false, released, 503, ""},
		{"mcp JSON-RPC error marked not-executed", "u_fail_rpc", `{"code":-32000,"not_executed":true,"succeed_after":1}`, true, released, 502, wire.CodeUpstreamUnreachable},
		{"mcp protocol refusal -32602", "u_fail_rpc", `{"code":-32602,"succeed_after":1}`, true, released, 502, wire.CodeUpstreamUnreachable},
		{"mcp protocol refusal -32601", "u_fail_rpc", `{"code":-32601,"succeed_after":1}`, true, released, 502, wire.CodeUpstreamUnreachable},
		{"mcp isError, record_is_error: false, after acting", "v_fail_tool", `{"succeed_after":1}`, true, unknownOutcome, 500, wire.CodeToolFailed},
		{"mcp isError, record_is_error: false, marked not-executed", "v_fail_tool", `{"not_executed":true,"succeed_after":1}`, true, released, 500, ""},
		{"rerun tool: http 500", "pay-rerun", `{"status":500}`, false, released, 500, ""},
		{"rerun tool: mcp JSON-RPC error", "r_fail_rpc", `{"succeed_after":1}`, true, released, 502, wire.CodeUpstreamUnreachable},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			session := fmt.Sprintf("evidence-%d", i)
			var replies [3]reply
			for attempt := range replies {
				replies[attempt] = keyedCall(t, g.addr, session, 1, tc.tool, tc.args)
			}
			executions := up.executions(session)
			if tc.mcp {
				executions = mcpExecutions(session)
			}
			state := recordState(t, g.addr, adminToken, session, tc.tool, tc.args)
			t.Logf("%s (%s): 3 attempts, %d executions, record %s; answers %d %s, %d %s, %d %s", tc.name, tc.tool, executions, state,
				replies[0].status, replies[0].problemCode(), replies[1].status, replies[1].problemCode(), replies[2].status, replies[2].problemCode())

			first := replies[0]
			if first.status != tc.firstStatus || first.problemCode() != tc.firstCode {
				t.Errorf("first answer %d %q, want %d %q: %s", first.status, first.problemCode(), tc.firstStatus, tc.firstCode, first.body)
			}
			switch tc.want {
			case unknownOutcome:
				if executions != 1 || state != "UNKNOWN" || retryable(t, first) {
					t.Errorf("want 1 execution, UNKNOWN, not retryable; got %d, %s, %s", executions, state, first.body)
				}
				for _, r := range replies[1:] {
					if r.status != http.StatusConflict || r.problemCode() != wire.CodeOutcomeUnknown {
						t.Errorf("retry: %d %s, want 409 outcome_unknown", r.status, r.body)
					}
				}
			case released:
				if executions != 2 || state != "COMPLETED" || (first.problemCode() != "" && !retryable(t, first)) {
					t.Errorf("want 2 executions, COMPLETED, retryable; got %d, %s, %s", executions, state, first.body)
				}
				if replies[1].status != http.StatusOK || replies[1].header.Get(wire.HeaderReplayed) != "false" {
					t.Errorf("retry after a release: %d %s, want the tool run again (200)", replies[1].status, replies[1].body)
				}
				if replies[2].status != http.StatusOK || replies[2].header.Get(wire.HeaderReplayed) != "true" {
					t.Errorf("third attempt: %d %s, want the replay of the retry", replies[2].status, replies[2].body)
				}
			}
		})
	}
}

// retryable is the "retryable" member of a problem answer.
func retryable(t *testing.T, r reply) bool {
	t.Helper()
	var p struct{ Retryable *bool }
	if err := json.Unmarshal(r.body, &p); err != nil || p.Retryable == nil {
		t.Errorf("not a problem with retryable: %d %s", r.status, r.body)
		return true
	}
	return *p.Retryable
}

// recordState is the state of a call's record as the admin API shows it
// ("none" when there is no record).
func recordState(t *testing.T, addr, adminToken, session, tool, args string) string {
	t.Helper()
	key, err := keyderive.Key(session, 1, tool, []byte(args))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/admin/v1/records/anonymous/"+tool+"/"+key, nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	r := do(t, req)
	if r.status == http.StatusNotFound {
		return "none"
	}
	var rec struct{ State string }
	if err := json.Unmarshal(r.body, &rec); err != nil || rec.State == "" {
		t.Errorf("admin record: %d %s", r.status, r.body)
	}
	return rec.State
}
