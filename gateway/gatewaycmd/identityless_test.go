package gatewaycmd

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/internal/oidctest"
	"github.com/toolgateway/toolgateway/wire"
)

// pathCounter is an HTTP upstream that counts the requests of each path
// (one tool each), delaying every answer so concurrent duplicates overlap.
type pathCounter struct {
	srv *httptest.Server
	mu  sync.Mutex
	n   map[string]int
}

func newPathCounter(t *testing.T, delay time.Duration) *pathCounter {
	c := &pathCounter{n: map[string]int{}}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.n[r.URL.Path]++
		c.mu.Unlock()
		time.Sleep(delay)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"done":true}`))
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *pathCounter) runs(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[path]
}

// TestIdentitylessCallsRunOncePerPerson runs the real program on each
// store with auth.oidc on a real OpenID provider and calls it as ChatGPT,
// Claude Desktop and Claude.ai do: go-sdk's client with the person's
// access token and no identity in _meta. Counted at the upstream: the
// same call 5× in a row and 8× at once runs once each; two people's same
// call runs once for each; a call after its dedupe window runs again; a
// call held for approval, approved by the operator, then repeated runs
// once; a SIGKILL of the gateway between a call and its repeat leaves one
// execution; a static token's identityless call is refused and runs
// nothing.
func TestIdentitylessCallsRunOncePerPerson(t *testing.T) {
	bin := buildGateway(t)
	// The single-node stores (Redis Cluster is not covered here).
	stores := killTestStores("identityless")
	delete(stores, "redis-cluster")
	for name, storeSection := range stores {
		// Only the embedded store keeps an approval's requester so far (the
		// approvals work brings it to Redis and PostgreSQL).
		keepsRequester := name == "embedded"
		t.Run(name, func(t *testing.T) { identitylessCallsRunOnce(t, bin, storeSection(t), keepsRequester) })
	}
}

func identitylessCallsRunOnce(t *testing.T, bin, storeSection string, keepsRequester bool) {
	p := oidctest.Start(t, oidcAudience)
	up := newPathCounter(t, 300*time.Millisecond)
	addr := freeAddr(t)
	const adminToken = "identityless-admin"
	config := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(config, []byte("listen: "+addr+"\n"+storeSection+`admin:
  token_sha256: `+tokenHash(adminToken)+`
auth:
  tenants:
    - name: static
      token_sha256: `+tokenHash("static-token")+`
  oidc:
    issuer: `+p.Issuer+`
    audience: `+oidcAudience+`
    tenant_claim: `+oidctest.TenantClaim+`
approvals:
  notify:
    url: http://127.0.0.1:9/unused
    secret_env: IDENTITYLESS_NOTIFY_SECRET
    console_base_url: https://gw.example.com
tools:
  - name: refund
    http:
      url: `+up.srv.URL+`/refund
  - name: ping
    dedupe_window: 2s
    http:
      url: `+up.srv.URL+`/ping
  - name: send
    identityless: refuse
    http:
      url: `+up.srv.URL+`/send
  - name: payout
    http:
      url: `+up.srv.URL+`/payout
    decide:
      - decision: approve
        reason: "finance approves payouts"
`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("IDENTITYLESS_NOTIFY_SECRET", "s3cret-for-the-webhook")
	gw := startReplica(t, bin, config, addr)
	ada := mcpClientWithToken(t, addr, p.Token(t, "org:acme", oidctest.SubjectScopePrefix+"ada"))
	bob := mcpClientWithToken(t, addr, p.Token(t, "org:acme", oidctest.SubjectScopePrefix+"bob"))
	call := func(cs *mcp.ClientSession, tool, args string) (*mcp.CallToolResult, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: json.RawMessage(args)})
	}
	mustCall := func(cs *mcp.ClientSession, tool, args string, replayed bool) *mcp.CallToolResult {
		t.Helper()
		res, err := call(cs, tool, args)
		if err != nil || res.IsError || res.Meta[wire.MetaReplayed] != replayed || res.Meta[wire.MetaIdentity] != wire.MetaIdentityFingerprint {
			t.Fatalf("%s %s: %v %+v; want replayed=%v, identity fingerprint", tool, args, err, res, replayed)
		}
		if replayed {
			note, ok := res.Content[0].(*mcp.TextContent)
			if !ok || !strings.HasPrefix(note.Text, "This exact call") || len(res.Content) != 2 {
				t.Fatalf("a fingerprint replay's first text tells the model it already ran: %+v", res.Content)
			}
		}
		return res
	}

	// 5× in a row: one run, then four replays of it.
	first := mustCall(ada, "refund", `{"amount":5}`, false)
	for range 4 {
		again := mustCall(ada, "refund", `{"amount":5}`, true)
		if again.Meta[wire.MetaExecutionID] != first.Meta[wire.MetaExecutionID] {
			t.Fatalf("replay of execution %v, want %v", again.Meta[wire.MetaExecutionID], first.Meta[wire.MetaExecutionID])
		}
	}
	if n := up.runs("/refund"); n != 1 {
		t.Fatalf("5 identical calls ran %d times, want 1", n)
	}

	// 8 at once: one runs, the others wait for it and replay it.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if res, err := call(ada, "refund", `{"amount":6}`); err != nil || res.IsError {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a concurrent duplicate failed: %v", err)
	}
	if n := up.runs("/refund"); n != 2 {
		t.Fatalf("8 concurrent identical calls ran %d times, want 1 (2 in all)", n)
	}

	// Another person's same call is their own.
	mustCall(bob, "refund", `{"amount":5}`, false)
	mustCall(bob, "refund", `{"amount":5}`, true)
	if n := up.runs("/refund"); n != 3 {
		t.Fatalf("bob's call: %d runs in all, want 3", n)
	}

	// The record's session names the person: fp:host-user:<issuer host>:bob.
	issuerHost := strings.TrimSuffix(strings.TrimPrefix(p.Issuer, "http://"), "/")
	session := wire.FingerprintSessionPrefix + "host-user:" + issuerHost + ":bob"
	records := adminRecords(t, addr, adminToken, "tenant=acme&tool=refund&session="+url.QueryEscape(session))
	if strings.Count(records, `"session_id":"`+session+`"`) != 1 {
		t.Fatalf("bob's records: %s; want one, with session %s", records, session)
	} else if identity := `"identity":{"kind":"fingerprint","principal":"host-user:` + issuerHost + `:bob"`; !strings.Contains(records, identity) ||
		!strings.Contains(records, `"window":"24h0m0s"}`) {
		// The record says which identity keyed it, with its window: every
		// store keeps it.
		t.Fatalf("bob's record: %s; want %s with the 24h window", records, identity)
	}

	// `gateway admin exec` shows it on its identity line.
	var shown bytes.Buffer
	env := func(name string) string {
		if name == envAdminToken {
			return adminToken
		}
		return ""
	}
	execID, _ := first.Meta[wire.MetaExecutionID].(string)
	if err := RunIO(context.Background(), []string{"gateway", "admin", "-url", "http://" + addr, "exec", execID}, env, strings.NewReader(""), &shown); err != nil ||
		!regexp.MustCompile(`(?m)^identity +fingerprint host-user:`+regexp.QuoteMeta(issuerHost)+`:ada`).MatchString(shown.String()) {
		t.Fatalf("gateway admin exec: %v\n%s", err, shown.String())
	}

	// A static token names no person: refused, nothing runs.
	static := mcpClientWithToken(t, addr, "static-token")
	if _, err := call(static, "refund", `{"amount":5}`); err == nil || !strings.Contains(err.Error(), "names no person") {
		t.Fatalf("a static token's identityless call: %v, want -32602 naming why", err)
	}
	if n := up.runs("/refund"); n != 3 {
		t.Fatalf("the static token's call ran: %d runs", n)
	}

	// A tool that opted out refuses a person's identityless call too.
	if _, err := call(ada, "send", `{"to":"bob"}`); err == nil || !strings.Contains(err.Error(), "send the agent session") {
		t.Fatalf("an opted-out tool's identityless call: %v, want -32602 agent_session_missing", err)
	}
	if n := up.runs("/send"); n != 0 {
		t.Fatalf("the opted-out tool ran %d times", n)
	}

	// After its window (2s, aligned) the same call is a new call. The
	// first two calls start just after a window begins, so both fall in it.
	time.Sleep(2*time.Second - time.Duration(time.Now().UnixNano()%int64(2*time.Second)) + 20*time.Millisecond)
	mustCall(ada, "ping", `{}`, false)
	mustCall(ada, "ping", `{}`, true)
	time.Sleep(2100 * time.Millisecond) // any two instants 2.1s apart lie in different 2s windows
	mustCall(ada, "ping", `{}`, false)
	if n := up.runs("/ping"); n != 2 {
		t.Fatalf("ping across two windows ran %d times, want 2", n)
	}

	// Held for approval: the result says where to approve; approved by
	// the operator, the repeated call ("go on") runs once.
	res, err := call(ada, "payout", `{"amount":900}`)
	if err != nil || !res.IsError {
		t.Fatalf("payout: %v %+v, want approval_pending as a tool result", err, res)
	}
	var pending struct {
		ApprovalID string `json:"approval_id"`
	}
	raw, _ := json.Marshal(res.StructuredContent)
	text := res.Content[0].(*mcp.TextContent).Text
	if json.Unmarshal(raw, &pending) != nil || pending.ApprovalID == "" ||
		!strings.Contains(text, "https://gw.example.com/console/approvals/"+pending.ApprovalID) {
		t.Fatalf("pending result %s %q: want the approval id and its console link", raw, text)
	}
	if again, err := call(ada, "payout", `{"amount":900}`); err != nil || !again.IsError ||
		!strings.Contains(again.Content[0].(*mcp.TextContent).Text, pending.ApprovalID) {
		t.Fatalf("the repeat before approval: %v %+v, want the same pending approval", err, again)
	}
	// The approval names the person who asked, as the host signed them in.
	get, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/admin/v1/approvals/"+pending.ApprovalID, nil)
	get.Header.Set("Authorization", "Bearer "+adminToken)
	if r := do(t, get); r.status != http.StatusOK || (keepsRequester && !strings.Contains(string(r.body), `"requester":"host-user:`+issuerHost+`:ada"`)) {
		t.Fatalf("the approval: %d %s; want requester host-user:%s:ada", r.status, r.body, issuerHost)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/admin/v1/approvals/"+pending.ApprovalID+"/approve", strings.NewReader(`{"by":"ops"}`))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/json")
	if r := do(t, req); r.status != http.StatusOK {
		t.Fatalf("approve: %d %s", r.status, r.body)
	}
	mustCall(ada, "payout", `{"amount":900}`, false)
	mustCall(ada, "payout", `{"amount":900}`, true)
	if n := up.runs("/payout"); n != 1 {
		t.Fatalf("the approved payout ran %d times, want 1", n)
	}

	// SIGKILL between a call and its repeat: still one execution.
	mustCall(ada, "refund", `{"amount":8}`, false)
	gw.kill()
	startReplica(t, bin, config, addr)
	ada = mcpClientWithToken(t, addr, p.Token(t, "org:acme", oidctest.SubjectScopePrefix+"ada"))
	mustCall(ada, "refund", `{"amount":8}`, true)
	if n := up.runs("/refund"); n != 4 {
		t.Fatalf("the call repeated after a kill: %d runs in all, want 4", n)
	}
}

// adminRecords lists every record matching query through the admin API,
// with the CLI's paging loop (every page, following next_cursor): a
// Redis page may hold fewer records than its limit, even none, and still
// have a cursor (its SCAN walks the whole shared keyspace in bounded
// steps). token is the admin token. It returns each record's JSON, one
// per line.
func adminRecords(t *testing.T, addr, token, query string) string {
	t.Helper()
	q, err := url.ParseQuery(query)
	if err != nil {
		t.Fatal(err)
	}
	c := &adminClient{base: "http://" + addr, token: token, client: http.DefaultClient}
	items, _, err := c.listPages(t.Context(), "/admin/v1/records", "records", q, true)
	if err != nil {
		t.Fatalf("admin records %s: %v", query, err)
	}
	lines := make([]string, len(items))
	for i, item := range items {
		lines[i] = string(item)
	}
	return strings.Join(lines, "\n")
}
