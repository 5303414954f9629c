package gateway_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/console"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

var consoleCSRF = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// consoleBrowser signs a cookie-keeping client in to the gateway's console.
func consoleBrowser(t *testing.T, h *harness, token string) (*http.Client, string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	page := consoleGet(t, c, h.Srv.URL+"/console/signin")
	resp, err := c.PostForm(h.Srv.URL+"/console/signin", url.Values{"csrf": {consoleCSRF.FindStringSubmatch(page)[1]}, "name": {"olga"}, "token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return c, string(b)
}

func consoleGet(t *testing.T, c *http.Client, u string) string {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestConsoleResolvesThroughTheAdminValidation: the console is served on
// the admin side with the admin token only; its resolve form is validated
// exactly as the admin API's resolve body (a bad one changes nothing), and
// a resolved record is what the agent's retry replays, the tool not run.
func TestConsoleResolvesThroughTheAdminValidation(t *testing.T) {
	pay := newTestTool("pay")
	h := newHarness(t, storeEmbedded, []tools.Tool{pay, newTestTool("idle")}, withAdmin("adm"),
		withPolicy("pay", tools.Policy{ReplayTTL: time.Hour, LeaseExpiry: idempotency.LeaseExpiryUnknown}))
	if _, page := consoleBrowser(t, h, "not-adm"); !strings.Contains(page, "not the admin token") {
		t.Fatalf("wrong token signed in:\n%s", page)
	}
	c, page := consoleBrowser(t, h, "adm")
	if !strings.Contains(page, "Signed in as <strong>olga</strong>") {
		t.Fatalf("sign-in with the admin token:\n%s", page)
	}

	call := callSpec{tool: "pay", session: "agent", step: 1, args: `{"amount":5,"memo":"<script>alert(1)</script>"}`}
	key := derivedKey(t, "agent", 1, "pay", call.args)
	deadExec := ulid.Make().String()
	if _, err := h.store.Claim(context.Background(), idempotency.ClaimRequest{
		Scope:       idempotency.Scope{Tenant: callpath.AnonymousTenant, Tool: "pay", Key: key},
		Fingerprint: fingerprintOf(t, call.args), Step: &idempotency.Step{SessionID: "agent", Index: 1}, StepGuard: true,
		StepBoundKey: true, ExecutionID: deadExec, Owner: "dead", LockTTL: 300 * time.Millisecond,
		ReplayTTL: time.Hour, LeaseExpiry: idempotency.LeaseExpiryUnknown, CanonicalArguments: []byte(`{"amount":5,"memo":"<script>alert(1)</script>"}`),
	}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond)
	wantProblem(t, h.do(call), 409, wire.CodeOutcomeUnknown)

	if list := consoleGet(t, c, h.Srv.URL+"/console/uncertain"); !strings.Contains(list, deadExec) {
		t.Fatalf("uncertain page lacks %s:\n%s", deadExec, list)
	}
	page = consoleGet(t, c, h.Srv.URL+"/console/uncertain/"+deadExec)
	if strings.Contains(page, "<script>alert") || !strings.Contains(page, "&lt;script&gt;alert(1)") || strings.Contains(page, key) {
		t.Fatalf("record page (arguments as text, never the key):\n%s", page)
	}
	csrf := consoleCSRF.FindStringSubmatch(page)[1]
	resolve := h.Srv.URL + "/console/uncertain/" + deadExec + "/resolve"
	for _, bad := range []url.Values{
		{"status": {"201"}, "content_type": {"application/json"}, "body": {`{"charged": tru`}},
		{"status": {"500"}, "content_type": {"application/json"}, "body": {`{}`}},
		{"status": {"200"}, "content_type": {"not a type"}, "body": {`x`}},
	} {
		bad.Set("csrf", csrf)
		bad.Set("outcome", "committed")
		resp, err := c.PostForm(resolve, bad)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("resolve %v: %d, want 400", bad, resp.StatusCode)
		}
	}
	if rec, _ := h.store.Get(context.Background(), idempotency.Scope{Tenant: callpath.AnonymousTenant, Tool: "pay", Key: key}); rec.State != idempotency.StateUnknown {
		t.Fatalf("a bad resolution changed the record: %s", rec.State)
	}
	resp, err := c.PostForm(resolve, url.Values{"csrf": {csrf}, "outcome": {"committed"}, "status": {"201"}, "content_type": {"application/json"}, "body": {`{"charged": true}`}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	retry := h.do(call)
	if retry.status != 201 || string(retry.body) != `{"charged": true}` || retry.header.Get("Idempotent-Replayed") != "true" || pay.runs(key) != 0 {
		t.Fatalf("retry after the console's resolve: %d %q replayed=%s runs=%d", retry.status, retry.body, retry.header.Get("Idempotent-Replayed"), pay.runs(key))
	}
	if tools := consoleGet(t, c, h.Srv.URL+"/console/tools"); !strings.Contains(tools, "lease_expiry: unknown") || !strings.Contains(tools, "Replays</dt><dd>1</dd>") || !strings.Contains(tools, `id="tool-idle"`) {
		t.Fatalf("tools page:\n%s", tools)
	}
}

// TestConsoleNeedsAnAdminToken: without an admin token there is no console.
func TestConsoleNeedsAnAdminToken(t *testing.T) {
	h := newHarness(t, storeEmbedded, []tools.Tool{newTestTool("echo")})
	if r := h.get("/console/signin", ""); r.status != http.StatusNotFound {
		t.Fatalf("console without an admin token: %d", r.status)
	}
}

// forgedConsoleCookie is the session cookie an adversary holding only the
// config file could make before the console had keys of its own: signed
// with HMAC-SHA-256 keyed by HMAC(admin.token_sha256, "toolgateway
// console session v1"), with the matching CSRF token.
func forgedConsoleCookie(tokenSHA256 [sha256.Size]byte, now time.Time) (cookie, csrf string) {
	mac := hmac.New(sha256.New, tokenSHA256[:])
	mac.Write([]byte("toolgateway console session v1"))
	key := mac.Sum(nil)
	payload, _ := json.Marshal(map[string]any{"id": "f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0", "by": "mallory", "exp": now.Add(time.Hour).Unix()})
	mac = hmac.New(sha256.New, key)
	mac.Write(payload)
	cookie = base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
	mac = hmac.New(sha256.New, key)
	mac.Write([]byte("csrf\x00f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0"))
	return cookie, base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// TestConsoleRefusesSessionsForgedFromTheConfig: the config file holds
// admin.token_sha256; a session signed with a key derived from it is
// refused (the console's keys are the key file's), so the forged approve
// leaves the approval pending and the tool never runs.
func TestConsoleRefusesSessionsForgedFromTheConfig(t *testing.T) {
	sum := sha256.Sum256([]byte("adm"))
	for name, keys := range map[string][][]byte{"random key": nil, "key file": {console.NewSessionKey()}} {
		t.Run(name, func(t *testing.T) {
			h, tool := decideHarness(t, storeEmbedded, callpath.ApprovalSettings{}, withAdmin("adm"))
			if err := h.GW.ReloadConsoleKeys(keys); err != nil {
				t.Fatal(err)
			}
			call := refund("s", 1, "500")
			id := pendingID(t, h.Do(call))

			cookie, csrf := forgedConsoleCookie(sum, time.Now())
			noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			send := func(method, path string, form url.Values) *http.Response {
				req, _ := http.NewRequest(method, h.Srv.URL+path, strings.NewReader(form.Encode()))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				req.AddCookie(&http.Cookie{Name: "tg_console", Value: cookie})
				resp, err := noRedirect.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				return resp
			}
			if resp := send(http.MethodGet, "/console/approvals", nil); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/console/signin") {
				t.Fatalf("forged session on the approvals page: %d %s", resp.StatusCode, resp.Header.Get("Location"))
			}
			resp := send(http.MethodPost, "/console/approvals/"+id+"/decide", url.Values{"csrf": {csrf}, "action": {"approve"}, "note": {"forged"}})
			if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/console/signin") {
				t.Fatalf("forged approve: %d %s", resp.StatusCode, resp.Header.Get("Location"))
			}
			if rec, err := h.Store.(idempotency.Approvals).GetApproval(context.Background(), id); err != nil || rec.State != idempotency.StateAwaitingApproval {
				t.Fatalf("approval after the forged approve: %s, %v", rec.State, err)
			}
			if again := pendingID(t, h.Do(call)); again != id {
				t.Fatalf("the agent's retry answered approval %s, want the pending %s", again, id)
			}
			if n := tool.Runs(keyOf(t, call)); n != 0 {
				t.Fatalf("the tool ran %d times after a forged approve", n)
			}
		})
	}
}
