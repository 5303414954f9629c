package gatewaycmd

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/internal/pgtest"
	"github.com/toolgateway/toolgateway/internal/redistest"
	"github.com/toolgateway/toolgateway/keyderive"
	"github.com/toolgateway/toolgateway/wire"
)

// rawAnswerUpstream is an HTTP upstream written on a raw socket, because
// net/http cannot write what an adversary's upstream (or a proxy) can: a
// status 999, 600 or 099, a 101 Switching Protocols, two contradictory
// Toolgateway-Outcome headers. It reads each request with net/http's
// parser, acts (counts an execution per Agent-Session-Id) and then, on the
// first call of a session only, writes the raw answer its arguments name
// ({"answer": name}, one of rawAnswers); later calls of the session get
// 200. After a 101 it keeps the connection open, as a protocol switch
// would: a gateway that reads on waits for ever.
type rawAnswerUpstream struct {
	listener net.Listener
	mu       sync.Mutex
	runs     map[string]int
	conns    []net.Conn
}

// rawAnswers are the answers rawAnswerUpstream writes after acting.
var rawAnswers = map[string]string{
	"999":        "HTTP/1.1 999 Odd\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"odd\":999}",
	"600":        "HTTP/1.1 600 Odd\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"odd\":600}",
	"099":        "HTTP/1.1 099 Odd\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"odd\":099}",
	"101":        "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
	"20":         "HTTP/1.1 20 OK\r\nContent-Length: 2\r\n\r\n{}",
	"outcomes":   "HTTP/1.1 503 Service Unavailable\r\nToolgateway-Outcome: not-executed\r\nToolgateway-Outcome: executed\r\nContent-Length: 2\r\n\r\n{}",
	"list":       "HTTP/1.1 503 Service Unavailable\r\nToolgateway-Outcome: not-executed, executed\r\nContent-Length: 2\r\n\r\n{}",
	"408":        "HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
	"425":        "HTTP/1.1 425 Too Early\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
	"429":        "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
	"503 marked": "HTTP/1.1 503 Service Unavailable\r\nToolgateway-Outcome: not-executed\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
}

func startRawAnswerUpstream(t *testing.T) *rawAnswerUpstream {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &rawAnswerUpstream{listener: l, runs: map[string]int{}}
	go u.accept()
	t.Cleanup(func() {
		_ = l.Close()
		u.mu.Lock()
		defer u.mu.Unlock()
		for _, c := range u.conns {
			_ = c.Close()
		}
	})
	return u
}

func (u *rawAnswerUpstream) url() string { return "http://" + u.listener.Addr().String() }

func (u *rawAnswerUpstream) executions(session string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.runs[session]
}

func (u *rawAnswerUpstream) accept() {
	for {
		conn, err := u.listener.Accept()
		if err != nil {
			return
		}
		u.mu.Lock()
		u.conns = append(u.conns, conn)
		u.mu.Unlock()
		go u.serve(conn)
	}
}

func (u *rawAnswerUpstream) serve(conn net.Conn) {
	r := bufio.NewReader(conn)
	for {
		req, err := http.ReadRequest(r)
		if err != nil {
			_ = conn.Close()
			return
		}
		var args struct {
			Answer string `json:"answer"`
		}
		body, _ := io.ReadAll(req.Body)
		_ = json.Unmarshal(body, &args)
		session := req.Header.Get(wire.HeaderSessionID)
		u.mu.Lock()
		u.runs[session]++ // the side effect
		n := u.runs[session]
		u.mu.Unlock()
		answer, bad := rawAnswers[args.Answer]
		if n > 1 || !bad {
			ok := fmt.Sprintf(`{"ok":true,"run":%d}`, n)
			answer = fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(ok), ok)
		}
		if _, err := io.WriteString(conn, answer); err != nil {
			_ = conn.Close()
			return
		}
		if bad && n == 1 && args.Answer == "101" {
			return // the connection stays open, as after a protocol switch
		}
	}
}

// storeKind is one store the adversary's reproductions run on: its
// config's store section.
type storeKind struct {
	name, section string
}

// everyStore is the store section of each store kind: embedded, Redis,
// Redis Cluster (a private one) and PostgreSQL (a schema of the test's
// own); the Redis keys are removed afterwards.
func everyStore(t *testing.T) []storeKind {
	t.Helper()
	addr := redistest.Addr(t)
	prefix := redistest.Prefix("adversary")
	t.Cleanup(func() {
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		redistest.CleanPrefix(context.Background(), c, prefix)
	})
	cluster := redistest.StartCluster(t, 3)
	pgURL := pgtest.URL(t)
	return []storeKind{
		{"embedded", "store:\n  path: " + filepath.Join(t.TempDir(), "gw.db") + "\n"},
		{"redis", fmt.Sprintf("store:\n  redis_url: redis://%s/0\n  key_prefix: %q\n", addr, prefix)},
		{"redis-cluster", fmt.Sprintf("store:\n  cluster_addrs: [%s]\n  key_prefix: %q\n", strings.Join(cluster.Addrs(), ", "), redistest.Prefix("adversary-cluster"))},
		{"postgres", "store:\n  postgres_url: " + pgURL + "\n  postgres_schema: " + pgtest.Schema(t, pgURL) + "\n"},
	}
}

// boundedCall is keyedCall with a deadline: an answer the gateway must
// never wait on (after a 101, say) shows as a call that did not return.
func boundedCall(t *testing.T, addr, session, tool, args string) (reply, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	key, err := keyderive.Key(session, 1, tool, []byte(args))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/api/tools/v1/"+tool, strings.NewReader(args))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(wire.HeaderIdempotencyKey, key)
	req.Header.Set(wire.HeaderSessionID, session)
	req.Header.Set(wire.HeaderStepIndex, "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return reply{}, false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, false
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: body}, true
}

// TestAdversaryAnswersThatAreNoEvidence is issue 40's reproduction, on
// every store: an HTTP upstream (raw socket) acts and then answers what
// proves nothing — a status outside 200–599 (999, 600, 099), 101 Switching
// Protocols, a malformed status line, two contradictory
// Toolgateway-Outcome headers or a comma list of them, a 408/425/429 from
// a lease_expiry: unknown tool without not_executed_statuses. One call and
// three retries: 1 execution counted at the upstream, the record UNKNOWN,
// the first answer not retryable and never the upstream's non-final
// status, every retry 409 outcome_unknown, and no call hangs. With
// not_executed_statuses: [429] the 429 is evidence: released, the retry
// runs again (2 executions). A rerun tool's non-final answer becomes 502
// upstream_unreachable (retryable), never passed on; its retry runs again.
func TestAdversaryAnswersThatAreNoEvidence(t *testing.T) {
	up := startRawAnswerUpstream(t)
	const adminToken = "adversary-admin-token"
	sum := sha256.Sum256([]byte(adminToken))
	const (
		unknownOutcome = iota // 1 execution; UNKNOWN; first answer not retryable, then 409 outcome_unknown
		released              // the first answer passes on, the retry runs (2 executions), then replays; COMPLETED
	)
	cases := []struct {
		name, tool, answer string
		want               int
		firstStatus        int
		firstCode          string // "" when the upstream's own answer passes on
	}{
		{"status 999 after acting", "pay", "999", unknownOutcome, 502, wire.CodeUpstreamUnreachable},
		{"status 600 after acting", "pay", "600", unknownOutcome, 502, wire.CodeUpstreamUnreachable},
		{"status 099 after acting", "pay", "099", unknownOutcome, 502, wire.CodeUpstreamUnreachable},
		{"101 Switching Protocols after acting", "pay", "101", unknownOutcome, 502, wire.CodeUpstreamUnreachable},
		{"malformed status line after acting", "pay", "20", unknownOutcome, 502, wire.CodeUpstreamUnreachable},
		{"two Toolgateway-Outcome headers, not-executed then executed", "pay", "outcomes", unknownOutcome, 500, wire.CodeToolFailed},
		{"Toolgateway-Outcome: not-executed, executed", "pay", "list", unknownOutcome, 500, wire.CodeToolFailed},
		{"408 from an unknown tool", "pay", "408", unknownOutcome, 500, wire.CodeToolFailed},
		{"425 from an unknown tool", "pay", "425", unknownOutcome, 500, wire.CodeToolFailed},
		{"429 from an unknown tool", "pay", "429", unknownOutcome, 500, wire.CodeToolFailed},
		{"429 listed in not_executed_statuses", "pay-429", "429", released, 429, ""},
		{"408 not listed in not_executed_statuses [429]", "pay-429", "408", unknownOutcome, 500, wire.CodeToolFailed},
		{"503 marked not-executed, once", "pay", "503 marked", released, 503, ""},
		{"rerun tool: status 999", "pay-rerun", "999", released, 502, wire.CodeUpstreamUnreachable},
		{"rerun tool: 101 Switching Protocols", "pay-rerun", "101", released, 502, wire.CodeUpstreamUnreachable},
		{"rerun tool: 429", "pay-rerun", "429", released, 429, ""},
	}
	for _, store := range everyStore(t) {
		t.Run(store.name, func(t *testing.T) {
			g := startGateway(t, `listen: 127.0.0.1:0
`+store.section+`admin:
  token_sha256: `+hex.EncodeToString(sum[:])+`
tools:
  - name: pay
    lease_expiry: unknown
    http:
      url: `+up.url()+`
  - name: pay-429
    lease_expiry: unknown
    not_executed_statuses: [429]
    http:
      url: `+up.url()+`
  - name: pay-rerun
    http:
      url: `+up.url()+`
`)
			for i, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					session := fmt.Sprintf("adversary-%s-%d", store.name, i)
					args := `{"answer":"` + tc.answer + `"}`
					var replies [4]reply
					for attempt := range replies {
						r, ok := boundedCall(t, g.addr, session, tc.tool, args)
						if !ok {
							t.Fatalf("attempt %d did not return within 15s (the gateway waited on the upstream's %s)", attempt+1, tc.answer)
						}
						replies[attempt] = r
					}
					executions := up.executions(session)
					state := recordState(t, g.addr, adminToken, session, tc.tool, args)
					first := replies[0]
					t.Logf("%s: 4 attempts, %d executions, record %s; first %d %s", tc.name, executions, state, first.status, first.body)
					if first.status != tc.firstStatus || first.problemCode() != tc.firstCode {
						t.Errorf("first answer %d %q, want %d %q: %s", first.status, first.problemCode(), tc.firstStatus, tc.firstCode, first.body)
					}
					switch tc.want {
					case unknownOutcome:
						if executions != 1 || state != "UNKNOWN" || retryable(t, first) {
							t.Errorf("want 1 execution, UNKNOWN, not retryable; got %d executions, %s, %s", executions, state, first.body)
						}
						for _, r := range replies[1:] {
							if r.status != http.StatusConflict || r.problemCode() != wire.CodeOutcomeUnknown {
								t.Errorf("retry: %d %s, want 409 outcome_unknown", r.status, r.body)
							}
						}
					case released:
						if executions != 2 || state != "COMPLETED" || (first.problemCode() != "" && !retryable(t, first)) {
							t.Errorf("want 2 executions, COMPLETED, first answer retryable; got %d executions, %s, %s", executions, state, first.body)
						}
						if replies[1].status != http.StatusOK || replies[1].header.Get(wire.HeaderReplayed) != "false" {
							t.Errorf("retry after a release: %d %s, want the tool run again (200)", replies[1].status, replies[1].body)
						}
						for _, r := range replies[2:] {
							if r.status != http.StatusOK || r.header.Get(wire.HeaderReplayed) != "true" {
								t.Errorf("later retry: %d %s, want the replay", r.status, r.body)
							}
						}
					}
				})
			}
		})
	}
}

// TestNotExecutedStatusesRefusedAtLoad: a status not among 408, 425 and
// 429 (503 included), or one listed twice, stops start-up and `gateway
// check` with an error naming the tool and the field.
func TestNotExecutedStatusesRefusedAtLoad(t *testing.T) {
	for _, tc := range []struct{ list, want string }{
		{"[503]", "503 is not one of 408, 425, 429"},
		{"[200]", "200 is not one of 408, 425, 429"},
		{"[429, 429]", "429 is listed twice"},
	} {
		path := writeConfig(t, "listen: 127.0.0.1:0\nstore:\n  path: "+filepath.Join(t.TempDir(), "gw.db")+`
tools:
  - name: pay
    lease_expiry: unknown
    not_executed_statuses: `+tc.list+`
    http:
      url: http://127.0.0.1:9/pay
`)
		for _, cmd := range [][]string{{"gateway", "-config", path}, {"gateway", "check", "-config", path}} {
			var out strings.Builder
			err := Run(t.Context(), cmd, func(string) string { return "" }, &out)
			if err == nil || !strings.Contains(err.Error(), "(pay).not_executed_statuses") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v with not_executed_statuses %s: %v, want an error naming pay's not_executed_statuses: %s", cmd[1:], tc.list, err, tc.want)
			}
		}
	}
}

// `gateway check -json` reports each tool's effective not-executed
// statuses: none for lease_expiry: unknown by default, the list when
// given, all three for rerun.
func TestCheckReportsNotExecutedStatuses(t *testing.T) {
	path := writeConfig(t, "listen: 127.0.0.1:0\nstore:\n  path: "+filepath.Join(t.TempDir(), "gw.db")+`
tools:
  - name: pay
    lease_expiry: unknown
    http: {url: "http://127.0.0.1:9/pay"}
  - name: pay-429
    lease_expiry: unknown
    not_executed_statuses: [429]
    http: {url: "http://127.0.0.1:9/pay"}
  - name: pay-rerun
    http: {url: "http://127.0.0.1:9/pay"}
`)
	var out strings.Builder
	if err := Run(t.Context(), []string{"gateway", "check", "-json", "-config", path}, func(string) string { return "" }, &out); err != nil {
		t.Fatal(err)
	}
	var report CheckReport
	if err := json.Unmarshal([]byte(out.String()), &report); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"pay": "[]", "pay-429": "[429]", "pay-rerun": "[408 425 429]"}
	for _, tool := range report.Tools {
		if w, ok := want[tool.Name]; ok && fmt.Sprint(tool.NotExecutedStatuses) != w {
			t.Errorf("%s: not_executed_statuses %v, want %s", tool.Name, tool.NotExecutedStatuses, w)
		}
	}
}
