package console_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/console"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

func TestParseSessionKeys(t *testing.T) {
	a, b := make([]byte, 32), make([]byte, 48)
	for i := range b {
		b[i] = byte(i + 1)
	}
	text := "# rotated 2026-12-07: the new key first\n" + base64.StdEncoding.EncodeToString(b) + "\n\n  " + hex.EncodeToString(a) + "  \n" + base64.RawURLEncoding.EncodeToString(b) + "\n"
	keys, err := console.ParseSessionKeys(text)
	if err != nil || len(keys) != 3 || string(keys[0]) != string(b) || string(keys[1]) != string(a) || string(keys[2]) != string(b) {
		t.Fatalf("ParseSessionKeys = %d keys, %v", len(keys), err)
	}
	short := base64.StdEncoding.EncodeToString(b[:31])
	for text, want := range map[string]string{
		"":                             "no key",
		"# only a comment\n":           "no key",
		short:                          "line 1: 31 bytes: want at least 32",
		hex.EncodeToString(a) + "\n%%": "line 2: not hex or base64",
		"correct horse battery staple": "line 1: not hex or base64",
	} {
		_, err := console.ParseSessionKeys(text)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSessionKeys(%q) = %v, want %q", text, err, want)
		}
		if err != nil && text != "" && strings.Contains(err.Error(), strings.TrimSpace(text)) {
			t.Errorf("the error echoes the key: %v", err)
		}
	}
}

// keyRing is session keys a test changes under a running console, as a
// reload of the key file does.
type keyRing struct {
	mu   sync.Mutex
	keys [][]byte
}

func (k *keyRing) set(keys ...[]byte) { k.mu.Lock(); k.keys = keys; k.mu.Unlock() }
func (k *keyRing) get() [][]byte      { k.mu.Lock(); defer k.mu.Unlock(); return k.keys }

// TestSessionKeysRotate: the first key signs and every key verifies, so a
// session signed by the old key survives the new key's arrival (its CSRF
// token included) and ends when the old key is dropped.
func TestSessionKeysRotate(t *testing.T) {
	oldKey, newKey := console.NewSessionKey(), console.NewSessionKey()
	ring := &keyRing{}
	ring.set(oldKey)
	f := newFixtureWith(t, func(o *console.Options, _ string) { o.SessionKeys = ring.get })
	c := f.browser(t)
	f.signIn(t, c, "alice", adminToken, "/console/approvals")
	id := f.pendingApproval(t, "k1", `{"amount":5000}`, "big")

	ring.set(newKey, oldKey)
	resp, page := get(t, c, f.srv.URL+"/console/approvals")
	if resp.Request.URL.Path != "/console/approvals" || !strings.Contains(page, "Signed in as <strong>alice</strong>") {
		t.Fatalf("a session signed by the second key was refused: landed on %s", resp.Request.URL)
	}
	if resp, _ := post(t, c, f.srv.URL+"/console/approvals/"+id+"/decide", url.Values{"csrf": {csrfOf(t, page)}, "action": {"approve"}}); resp.Request.URL.Path != "/console/approvals" {
		t.Fatalf("decide with the second key's session: landed on %s", resp.Request.URL)
	}
	if rec, _ := f.store.GetApproval(context.Background(), id); rec.State != idempotency.StateApproved || rec.Approval.DecidedBy != "token:admin" || rec.Approval.ClaimedBy != "alice" {
		t.Fatalf("approval after the decide: %s by %q", rec.State, rec.Approval.DecidedBy)
	}

	ring.set(newKey)
	if resp, _ := get(t, c, f.srv.URL+"/console/tools"); resp.Request.URL.Path != "/console/signin" {
		t.Fatalf("the old key was dropped but its session still serves %s", resp.Request.URL)
	}
	// Signed in again, the session is the new key's.
	if resp, _ := f.signIn(t, c, "alice", adminToken, "/console/tools"); resp.Request.URL.Path != "/console/tools" {
		t.Fatalf("sign-in under the new key: landed on %s", resp.Request.URL)
	}
	ring.set(oldKey)
	if resp, _ := get(t, c, f.srv.URL+"/console/tools"); resp.Request.URL.Path != "/console/signin" {
		t.Fatal("a session signed by the new key verified under the old key alone")
	}
}

// noRedirect is a client that shows each response as it comes.
func noRedirect() *http.Client {
	return &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func cookieNamed(resp *http.Response, name string) *http.Cookie {
	for _, ck := range resp.Cookies() {
		if ck.Name == name {
			return ck
		}
	}
	return nil
}

// TestSecureCookies: console.secure_cookies marks every cookie Secure on
// plain HTTP (TLS ends at a proxy in front); without it, plain HTTP
// cookies are not.
func TestSecureCookies(t *testing.T) {
	for _, secure := range []bool{true, false} {
		f := newFixtureWith(t, func(o *console.Options, _ string) { o.Secure = secure })
		c := noRedirect()
		resp, page := get(t, c, f.srv.URL+"/console/signin")
		form := cookieNamed(resp, "tg_console_signin")
		if form == nil || form.Secure != secure {
			t.Fatalf("secure=%v: sign-in form cookie %+v", secure, form)
		}
		req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/console/signin", strings.NewReader(url.Values{"csrf": {csrfOf(t, page)}, "name": {"alice"}, "token": {adminToken}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(&http.Cookie{Name: form.Name, Value: form.Value})
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		session := cookieNamed(resp, "tg_console")
		if resp.StatusCode != http.StatusSeeOther || session == nil || session.Secure != secure || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode {
			t.Fatalf("secure=%v: sign-in %d, session cookie %+v", secure, resp.StatusCode, session)
		}
	}
}

// browserFrom is a cookie-keeping client whose connections come from the
// loopback address local (127.0.0.x), so the console sees another client.
func browserFrom(t *testing.T, local string) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	return &http.Client{Jar: jar, Transport: &http.Transport{DialContext: d.DialContext}}
}

// TestSignInThrottledPerAddress: after ten wrong tokens from one address,
// its next attempt is refused with 429 and Retry-After, the right token
// included, and signs nobody in; another address is not affected; the
// address may try again once its wait is over.
func TestSignInThrottledPerAddress(t *testing.T) {
	f := newFixture(t)
	guesser := browserFrom(t, "127.0.0.2")
	for i := range 10 {
		if resp, _ := f.signIn(t, guesser, "mallory", "guess-"+string(rune('a'+i)), "/console/approvals"); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d, want 401", i+1, resp.StatusCode)
		}
	}
	resp, page := f.signIn(t, guesser, "mallory", adminToken, "/console/approvals")
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "30" || !strings.Contains(page, "Too many sign-in attempts") {
		t.Fatalf("11th attempt (right token): %d Retry-After %q\n%s", resp.StatusCode, resp.Header.Get("Retry-After"), page)
	}
	if strings.Contains(page, adminToken) {
		t.Fatal("the 429 page echoes the token")
	}
	if resp, _ := get(t, guesser, f.srv.URL+"/console/approvals"); resp.Request.URL.Path != "/console/signin" {
		t.Fatalf("a throttled attempt signed in: %s", resp.Request.URL)
	}

	other := browserFrom(t, "127.0.0.3")
	if resp, _ := f.signIn(t, other, "olga", adminToken, "/console/approvals"); resp.Request.URL.Path != "/console/approvals" {
		t.Fatalf("another address was throttled too: %d %s", resp.StatusCode, resp.Request.URL)
	}

	f.clock.Add(30 * time.Second)
	if resp, _ := f.signIn(t, guesser, "mallory", adminToken, "/console/approvals"); resp.Request.URL.Path != "/console/approvals" {
		t.Fatalf("after the wait: %d %s", resp.StatusCode, resp.Request.URL)
	}
}

// TestTokenSignInOff: with the token sign-in off the page offers only the
// identity provider, and posting the admin token signs nobody in.
func TestTokenSignInOff(t *testing.T) {
	f := newFixtureWith(t, func(o *console.Options, base string) {
		o.TokenSignInOff = true
		o.OIDC = &console.OIDC{Issuer: "http://127.0.0.1:1/never-reached", ClientID: "console", RedirectURL: base + "/console/oidc/callback"}
	})
	c := f.browser(t)
	resp, page := get(t, c, f.srv.URL+"/console/signin")
	if resp.StatusCode != http.StatusOK || strings.Contains(page, `name="token"`) || strings.Contains(page, "Admin token") || !strings.Contains(page, `id="oidc-signin"`) {
		t.Fatalf("sign-in page with the token sign-in off: %d\n%s", resp.StatusCode, page)
	}
	// The CSRF token of the form that is no longer offered: a script that
	// kept one from before still signs nobody in.
	ck := f.signInCSRF(t, c)
	resp, _ = post(t, c, f.srv.URL+"/console/signin", url.Values{"csrf": {ck}, "name": {"mallory"}, "token": {adminToken}})
	if resp.StatusCode != http.StatusForbidden || cookieNamed(resp, "tg_console") != nil {
		t.Fatalf("POST of the admin token: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	if resp, _ := get(t, c, f.srv.URL+"/console/approvals"); resp.Request.URL.Path != "/console/signin" {
		t.Fatalf("the admin token signed in: %s", resp.Request.URL)
	}
}

// signInCSRF is the sign-in form's CSRF token as c's cookie holds it.
func (f *fixture) signInCSRF(t *testing.T, c *http.Client) string {
	t.Helper()
	u, _ := url.Parse(f.srv.URL + "/console/")
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == "tg_console_signin" {
			return ck.Value
		}
	}
	t.Fatal("no sign-in cookie")
	return ""
}

// TestMalformedCursorIs400: a page link whose cursor the store did not
// hand out answers 400, not 503 (the store is fine).
func TestMalformedCursorIs400(t *testing.T) {
	f := newFixture(t)
	c := f.browser(t)
	f.signIn(t, c, "alice", adminToken, "/console/approvals")
	for _, path := range []string{"/console/approvals?cursor=%21%21", "/console/approvals/pending?cursor=%21%21", "/console/uncertain?cursor=%21%21"} {
		if resp, page := get(t, c, f.srv.URL+path); resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, "not one this console made") {
			t.Errorf("%s: %d %s", path, resp.StatusCode, page)
		}
	}
}
