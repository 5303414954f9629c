package gatewaycmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/toolgateway/toolgateway/internal/oidctest"
)

// TestCheckRefusesBadConsoleOIDC: console.oidc is checked field by field.
func TestCheckRefusesBadConsoleOIDC(t *testing.T) {
	base := "listen: 127.0.0.1:0\nstore:\n  path: " + filepath.Join(t.TempDir(), "gw.db") + "\nadmin:\n  token_sha256: " + tokenHash("admin") + "\n"
	good := "    issuer: https://login.example.com/\n    client_id: console\n    client_secret_env: CONSOLE_SECRET\n    redirect_url: https://admin.example.com/console/oidc/callback\n"
	env := envOf(map[string]string{"CONSOLE_SECRET": "s3cret"})
	for _, c := range []struct{ name, config, errorHas string }{
		{"no issuer", base + "console:\n  oidc:\n" + strings.Replace(good, "https://login.example.com/", "", 1), "console.oidc.issuer"},
		{"no client id", base + "console:\n  oidc:\n" + strings.Replace(good, "client_id: console", "client_id: ''", 1), "console.oidc.client_id"},
		{"redirect elsewhere", base + "console:\n  oidc:\n" + strings.Replace(good, "/console/oidc/callback", "/callback", 1), "console.oidc.redirect_url"},
		{"empty allow entry", base + "console:\n  oidc:\n" + good + "    allow: ['']\n", "console.oidc.allow[0]"},
		{"no admin token", strings.Split(base, "admin:")[0] + "console:\n  oidc:\n" + good, "admin.token_sha256"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := Check(writeConfig(t, c.config), env); err == nil || !strings.Contains(err.Error(), c.errorHas) {
				t.Fatalf("check: %v, want an error naming %q", err, c.errorHas)
			}
		})
	}
	if _, err := Check(writeConfig(t, base+"console:\n  oidc:\n"+good), env); err != nil {
		t.Fatalf("a good console.oidc: %v", err)
	}
	// check (and verify) never serve the console: its client secret may be
	// absent where they run, a warning rather than an error.
	r, err := Check(writeConfig(t, base+"console:\n  oidc:\n"+strings.Replace(good, "CONSOLE_SECRET", "CONSOLE_SECRET_UNSET", 1)), env)
	if err != nil || !slices.ContainsFunc(r.Warnings, func(w string) bool { return strings.Contains(w, "CONSOLE_SECRET_UNSET is empty or unset") }) {
		t.Fatalf("check without the console's secret: %v, warnings %q", err, r.Warnings)
	}
}

// startOIDCConsole runs the program with the admin token "admin", callers
// signing in with op's access tokens, and the console signing operators in
// through op as clientID (registered here), console.oidc ending in
// consoleLines; its one tool, refund on upstream, asks for approval, its
// decide rule ending in ruleLines.
func startOIDCConsole(t *testing.T, op *oidctest.Provider, clientID, consoleLines, ruleLines, upstream string) *started {
	t.Helper()
	addr := freeAddr(t)
	callback := "http://" + addr + "/console/oidc/callback"
	op.RegisterWebClient(clientID, "console-secret", callback)
	return startGatewayEnv(t, fmt.Sprintf(`listen: %s
store:
  path: %s
admin:
  token_sha256: %s
auth:
  oidc:
    issuer: %s
    audience: %s
    tenant_claim: %s
console:
  oidc:
    client_id: %s
    client_secret_env: CONSOLE_SECRET
    redirect_url: %s
%stools:
  - name: refund
    http:
      url: %s
    decide:
      - decision: approve
%s`, addr, filepath.Join(t.TempDir(), "gw.db"), tokenHash("admin"), op.Issuer, oidcAudience, oidctest.TenantClaim,
		clientID, callback, consoleLines, upstream, ruleLines),
		envOf(map[string]string{"CONSOLE_SECRET": "console-secret"}))
}

// TestConsoleOIDCSignInDecidesAnApproval: through the real program, a
// call made with the provider's access token waits for approval; an
// operator signs in to the console through the same provider's login
// page, approves it, the approval records them by name and subject, and
// the call then runs once.
func TestConsoleOIDCSignInDecidesAnApproval(t *testing.T) {
	op := oidctest.Start(t, oidcAudience)
	up, runs := countingUpstream(t, 0)
	g := startOIDCConsole(t, op, "gateway-console", "    allow: ["+oidctest.UserEmail+"]\n", `        reason: "finance approves"`+"\n", up.URL)
	token := op.Token(t, "org:acme")
	args := `{"amount":900}`
	r := bearerCall(t, g.addr, token, "s", 1, "refund", args)
	var pending struct {
		Code       string `json:"code"`
		ApprovalID string `json:"approval_id"`
	}
	if json.Unmarshal(r.body, &pending) != nil || r.status != http.StatusConflict || pending.Code != "approval_pending" {
		t.Fatalf("first call: %d %s", r.status, r.body)
	}

	browser := signInThroughProvider(t, g.addr, op)
	page := getPage(t, browser, "http://"+g.addr+"/console/approvals")
	by := oidctest.UserName + " (" + oidctest.UserSubject + ")"
	if !strings.Contains(page, "Signed in as <strong>"+by+"</strong>") || !strings.Contains(page, pending.ApprovalID) {
		t.Fatalf("the console after signing in:\n%s", page)
	}
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
	resp, err := browser.PostForm("http://"+g.addr+"/console/approvals/"+pending.ApprovalID+"/decide", url.Values{"csrf": {csrf[1]}, "action": {"approve"}})
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("approve: %v %v", err, resp)
	}
	resp.Body.Close()

	req, _ := http.NewRequest(http.MethodGet, "http://"+g.addr+"/admin/v1/approvals/"+pending.ApprovalID, nil)
	req.Header.Set("Authorization", "Bearer admin")
	a := do(t, req)
	var decided struct {
		DecidedBy string `json:"decided_by"`
	}
	// The decider is the verified principal, never the display name.
	host := strings.TrimPrefix(strings.TrimPrefix(strings.TrimSuffix(op.Issuer, "/"), "http://"), "https://")
	if want := "oidc:" + host + ":" + oidctest.UserSubject; json.Unmarshal(a.body, &decided) != nil || decided.DecidedBy != want {
		t.Fatalf("the approval: %d %s, want decided_by %q (%s)", a.status, a.body, want, by)
	}
	for range 2 {
		if r := bearerCall(t, g.addr, token, "s", 1, "refund", args); r.status != http.StatusOK {
			t.Fatalf("after approval: %d %s", r.status, r.body)
		}
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the upstream ran %d times, want 1", n)
	}
}

// signInThroughProvider is a browser (cookie jar) that follows the
// console's provider link, posts the provider's login form as its example
// user and follows the signed-in page on.
func signInThroughProvider(t *testing.T, addr string, op *oidctest.Provider) *http.Client {
	t.Helper()
	return signInAs(t, addr, op, op.Username(), oidctest.UserPassword)
}

// signInAs is signInThroughProvider as the provider's user username.
func signInAs(t *testing.T, addr string, op *oidctest.Provider, username, password string) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	page := getPage(t, browser, "http://"+addr+"/console/oidc/start?next=/console/approvals")
	id := regexp.MustCompile(`name="id" value="([^"]+)"`).FindStringSubmatch(page)
	if id == nil {
		t.Fatalf("no login form at the provider:\n%s", page)
	}
	resp, err := browser.PostForm(strings.TrimSuffix(op.Issuer, "/")+"/login/username", url.Values{"id": {id[1]}, "username": {username}, "password": {password}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/console/oidc/callback" || !strings.Contains(string(body), `id="continue"`) {
		t.Fatalf("the provider's callback: %d %s\n%s", resp.StatusCode, resp.Request.URL, body)
	}
	return browser
}

func getPage(t *testing.T, c *http.Client, u string) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, u, nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
