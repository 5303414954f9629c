package gatewaycmd

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/budgets"
	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/boltstore"
	"github.com/toolgateway/toolgateway/keyderive"
	"github.com/toolgateway/toolgateway/tools"
)

const testAdminToken = "adm-secret-token-123"

// echoName is the test tool's name (not "echo": the bundled tools register
// that name globally once their package is linked in).
const echoName = "admin-echo"

// countingEcho answers with its arguments and counts runs per key.
type countingEcho struct {
	mu   sync.Mutex
	runs map[string]int
}

func (e *countingEcho) Spec() tools.Spec { return tools.Spec{Name: echoName, Description: "echo"} }

func (e *countingEcho) Call(_ context.Context, req *tools.Request) (*tools.Response, error) {
	e.mu.Lock()
	e.runs[req.IdempotencyKey]++
	e.mu.Unlock()
	return &tools.Response{Status: 200, ContentType: "application/json", Body: req.Arguments}, nil
}

func (e *countingEcho) runsOf(key string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.runs[key]
}

// adminFixture is a real gateway (embedded store, bundled tools, admin
// API on) served in process.
type adminFixture struct {
	t     *testing.T
	srv   *httptest.Server
	store *boltstore.Store
	echo  *countingEcho
}

func newAdminFixture(t *testing.T) *adminFixture {
	t.Helper()
	store, err := boltstore.Open(filepath.Join(t.TempDir(), "gw.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	echo := &countingEcho{runs: map[string]int{}}
	reg, err := tools.NewRegistryOf(echo)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(testAdminToken))
	// Each echo costs 1 of a daily budget of 1 000 (admin budgets).
	set, err := budgets.New([]budgets.Budget{{Name: "echo-daily", Limit: 1000, Scope: budgets.ScopeTenant, Window: budgets.Window{Calendar: "day"}}},
		map[string][]budgets.Charge{echoName: {{Budget: "echo-daily", Cost: "1"}}})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.NewServer(callpath.Options{
		Store: store, Tools: reg, AdminTokenSHA256: &sum, Budgets: set,
		Policies: map[string]tools.Policy{echoName: {LeaseExpiry: idempotency.LeaseExpiryUnknown, ReplayTTL: 2 * time.Hour}},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	return &adminFixture{t: t, srv: srv, store: store, echo: echo}
}

// call makes one echo call of session s, step n, and returns the response.
func (f *adminFixture) call(session string, step uint64, args string) *http.Response {
	f.t.Helper()
	key, err := keyderive.Key(session, step, echoName, []byte(args))
	if err != nil {
		f.t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/api/tools/v1/"+echoName, strings.NewReader(args))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Agent-Session-Id", session)
	req.Header.Set("Agent-Step-Index", strconv.FormatUint(step, 10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

// admin runs `gateway admin -url … args…` with the token in the
// environment and returns stdout and the error.
func (f *adminFixture) admin(args ...string) (string, error) {
	f.t.Helper()
	var out bytes.Buffer
	env := func(name string) string {
		if name == envAdminToken {
			return testAdminToken
		}
		return ""
	}
	err := RunIO(context.Background(), append([]string{"gateway", "admin", "-url", f.srv.URL}, args...), env, strings.NewReader(""), &out)
	if strings.Contains(out.String(), testAdminToken) || (err != nil && strings.Contains(err.Error(), testAdminToken)) {
		f.t.Fatalf("the admin token was printed: %q %v", out.String(), err)
	}
	return out.String(), err
}

func (f *adminFixture) mustAdmin(args ...string) string {
	f.t.Helper()
	out, err := f.admin(args...)
	if err != nil {
		f.t.Fatalf("gateway admin %v: %v", args, err)
	}
	return out
}

// TestAdminCommandResolvesUnknown walks the operator's path: a call is
// UNKNOWN, `admin list -state UNKNOWN` shows it, `admin resolve` stores
// the real outcome, and the agent's retry replays it without running echo.
func TestAdminCommandResolvesUnknown(t *testing.T) {
	f := newAdminFixture(t)
	if resp := f.call("sess", 1, `{"n":1}`); resp.StatusCode != 200 {
		t.Fatalf("first call: %d", resp.StatusCode)
	}
	// A gateway died holding the claim of step 2.
	args := `{"n":2}`
	key, _ := keyderive.Key("sess", 2, echoName, []byte(args))
	canonical, _ := keyderive.Canonicalize([]byte(args))
	dead := ulid.Make().String()
	if _, err := f.store.Claim(context.Background(), idempotency.ClaimRequest{
		Scope:       idempotency.Scope{Tenant: callpath.AnonymousTenant, Tool: echoName, Key: key},
		Fingerprint: keyderive.Fingerprint(canonical), Step: &idempotency.Step{SessionID: "sess", Index: 2},
		StepGuard: true, StepBoundKey: true, ExecutionID: dead, Owner: "dead",
		LockTTL: 300 * time.Millisecond, ReplayTTL: time.Hour, LeaseExpiry: idempotency.LeaseExpiryUnknown,
		CanonicalArguments: canonical,
	}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond)
	if resp := f.call("sess", 2, args); resp.StatusCode != 409 {
		t.Fatalf("call on the dead claim: %d, want 409 outcome_unknown", resp.StatusCode)
	}

	all := f.mustAdmin("list")
	lines := strings.Split(strings.TrimSpace(all), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "STATE") || !strings.HasSuffix(lines[len(lines)-1], "2 records") {
		t.Fatalf("list:\n%s", all)
	}
	if strings.Contains(all, key) || !strings.Contains(all, idempotency.KeyPrefix(key)+"…") {
		t.Fatalf("the table must show key prefixes only:\n%s", all)
	}
	// Columns line up: every row's execution id starts where the header's does.
	col := len([]rune(lines[0][:strings.Index(lines[0], "EXECUTION ID")]))
	for _, line := range lines[1:3] {
		l := []rune(line)
		if len(l) <= col || string(l[col-2:col]) != "  " || l[col] == ' ' {
			t.Fatalf("columns are not aligned:\n%s", all)
		}
	}
	unknown := f.mustAdmin("list", "-state", "UNKNOWN")
	if !strings.Contains(unknown, dead) || !strings.Contains(unknown, "1 records") {
		t.Fatalf("list -state UNKNOWN:\n%s", unknown)
	}
	if out := f.mustAdmin("-json", "list", "-state", "unknown"); !strings.Contains(out, `"key": "`+key+`"`) {
		t.Fatalf("list -json:\n%s", out)
	}

	shown := f.mustAdmin("exec", dead)
	if !strings.Contains(shown, "UNKNOWN") || !strings.Contains(shown, key) {
		t.Fatalf("exec:\n%s", shown)
	}
	// What the operator checks the effect against: the step, the key the
	// upstream saw and the arguments.
	fields := map[string]string{}
	for _, line := range strings.Split(shown, "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			fields[f[0]] = f[1]
		}
	}
	for name, want := range map[string]string{"session_id": "sess", "step_index": "2", "identity": "gateway",
		"upstream_key": tools.ScopedKey(callpath.AnonymousTenant, echoName, key), "arguments": string(canonical)} {
		if fields[name] != want {
			t.Fatalf("exec shows %s %q, want %q:\n%s", name, fields[name], want, shown)
		}
	}
	bodyFile := filepath.Join(t.TempDir(), "body.json")
	if err := os.WriteFile(bodyFile, []byte(`{"n":2,"echoed":"by the operator"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	resolved := f.mustAdmin("resolve", "anonymous", echoName, key, "-status", "200", "-body", "@"+bodyFile)
	if !strings.Contains(resolved, "COMPLETED") || !strings.Contains(resolved, `{"n":2,"echoed":"by the operator"}`) {
		t.Fatalf("resolve:\n%s", resolved)
	}
	retry := f.call("sess", 2, args)
	body, _ := io.ReadAll(retry.Body)
	if retry.StatusCode != 200 || string(body) != `{"n":2,"echoed":"by the operator"}` ||
		retry.Header.Get("Idempotent-Replayed") != "true" || retry.Header.Get("Tool-Execution-Id") != dead {
		t.Fatalf("retry after resolve: %d %s %v", retry.StatusCode, body, retry.Header)
	}
	if n := f.echo.runsOf(key); n != 0 {
		t.Fatalf("echo ran %d times for the resolved key, want 0", n)
	}
	if out := f.mustAdmin("show", "anonymous", echoName, key, "-response"); !strings.Contains(out, "response_status  200") || !strings.Contains(out, "by the operator") {
		t.Fatalf("show -response:\n%s", out)
	}

	// Errors: exit 1 with the problem's detail.
	_, err := f.admin("resolve", "anonymous", echoName, key, "-status", "200", "-body", "{}")
	if err == nil || !strings.Contains(err.Error(), "record_not_resolvable") || !strings.Contains(err.Error(), "can be resolved") {
		t.Fatalf("resolving a COMPLETED record: %v", err)
	}
	if _, err := f.admin("list", "-state", "DONE"); err == nil || !strings.Contains(err.Error(), "invalid_admin_request") {
		t.Fatalf("bad state: %v", err)
	}
	if _, err := f.admin("exec", "nope"); err == nil || !strings.Contains(err.Error(), "404 record_not_found") {
		t.Fatalf("missing execution: %v", err)
	}
	if _, err := f.admin("resolve", "anonymous", echoName, key, "-status", "200", "-body", "{not json"); err == nil {
		t.Fatal("a body that is not JSON was sent")
	}

	// Delete, then the call runs again.
	if out := f.mustAdmin("delete", "anonymous", echoName, key); !strings.Contains(out, "deleted anonymous/"+echoName+"/"+idempotency.KeyPrefix(key)+"…") || strings.Contains(out, key) {
		t.Fatalf("delete: %s", out)
	}
	if resp := f.call("sess", 2, args); resp.StatusCode != 200 || resp.Header.Get("Idempotent-Replayed") != "false" {
		t.Fatalf("call after delete: %d replayed=%s", resp.StatusCode, resp.Header.Get("Idempotent-Replayed"))
	}
}

// TestAdminCommandPagesAndAuth: -all follows the cursor; a wrong or
// missing token fails without printing it.
func TestAdminCommandPagesAndAuth(t *testing.T) {
	f := newAdminFixture(t)
	for i := uint64(1); i <= 5; i++ {
		if resp := f.call("pages", i, `{}`); resp.StatusCode != 200 {
			t.Fatalf("call %d: %d", i, resp.StatusCode)
		}
	}
	page := f.mustAdmin("list", "-limit", "2")
	if !strings.Contains(page, "2 records; more: -cursor ") {
		t.Fatalf("one page:\n%s", page)
	}
	if all := f.mustAdmin("list", "-limit", "2", "-all"); !strings.HasSuffix(strings.TrimSpace(all), "\n5 records") {
		t.Fatalf("-all:\n%s", all)
	}

	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("wrong-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := RunIO(context.Background(), []string{"gateway", "admin", "-url", f.srv.URL, "-token-file", tokenFile, "list"},
		func(string) string { return "" }, strings.NewReader(""), &out)
	if err == nil || !strings.Contains(err.Error(), "401 unauthorized") || strings.Contains(err.Error(), "wrong-token") {
		t.Fatalf("wrong token: %v", err)
	}
	err = RunIO(context.Background(), []string{"gateway", "admin", "-url", f.srv.URL, "list"},
		func(string) string { return "" }, strings.NewReader(""), &out)
	if err == nil || !strings.Contains(err.Error(), envAdminToken) {
		t.Fatalf("no token: %v", err)
	}
	if out, err := f.admin("resolve", "-h"); err != nil || !strings.Contains(out, "-content-type") {
		t.Fatalf("resolve -h: %v\n%s", err, out)
	}
	if _, err := f.admin("frobnicate"); err == nil || !strings.Contains(err.Error(), "unknown command") {
		t.Fatalf("unknown command: %v", err)
	}
	if _, err := f.admin("show", "anonymous", echoName); err == nil || !strings.Contains(err.Error(), "want 3 arguments") {
		t.Fatalf("missing argument: %v", err)
	}
}

// gateway -h names the admin subcommand.
func TestHelpListsAdmin(t *testing.T) {
	var out bytes.Buffer
	if err := Run(context.Background(), []string{"gateway", "-h"}, func(string) string { return "" }, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "admin ") || !strings.Contains(out.String(), "resolve") {
		t.Fatalf("gateway -h does not list admin:\n%s", out.String())
	}
}

// TestAdminCommandBudgets: `gateway admin budgets -tenant T` prints the
// tenant's budget window: one echo call used 1 of 1 000; -json prints
// the API's answer; no -tenant is an error naming the flag.
func TestAdminCommandBudgets(t *testing.T) {
	f := newAdminFixture(t)
	if resp := f.call("b", 0, `{"x":1}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("echo: %d", resp.StatusCode)
	}
	out := f.mustAdmin("budgets", "-tenant", callpath.AnonymousTenant)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "BUDGET") || !strings.Contains(lines[1], "echo-daily") ||
		!strings.HasSuffix(strings.Join(strings.Fields(lines[1])[4:], " "), "1000 1 0 999") {
		t.Fatalf("admin budgets:\n%s", out)
	}
	if out := f.mustAdmin("budgets", "-tenant", callpath.AnonymousTenant, "-json"); !strings.Contains(out, `"used": 1`) {
		t.Fatalf("admin budgets -json:\n%s", out)
	}
	if _, err := f.admin("budgets"); err == nil || !strings.Contains(err.Error(), "-tenant is required") {
		t.Fatalf("admin budgets without -tenant: %v", err)
	}
}
