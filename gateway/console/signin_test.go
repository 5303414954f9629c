package console_test

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestSignInWrongTokenStaysWithMessage(t *testing.T) {
	f := newFixture(t)
	c := f.browser(t)
	resp, page := f.signIn(t, c, "alice", "not-the-token", "/console/approvals")
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(page, "not the admin token") {
		t.Fatalf("wrong token: %d\n%s", resp.StatusCode, page)
	}
	if strings.Contains(page, "not-the-token") {
		t.Fatal("the page echoes the submitted token")
	}
	// Still signed out: a console page sends it back to sign-in.
	resp, _ = get(t, c, f.srv.URL+"/console/approvals")
	if !strings.HasSuffix(resp.Request.URL.Path, "/console/signin") {
		t.Fatalf("after a wrong token the console let the browser in: %s", resp.Request.URL)
	}
}

func TestSignInCookieAndReturnToAskedPage(t *testing.T) {
	f := newFixture(t)
	c := f.browser(t)
	resp, _ := get(t, c, f.srv.URL+"/console/uncertain")
	if resp.Request.URL.Path != "/console/signin" || resp.Request.URL.Query().Get("next") != "/console/uncertain" {
		t.Fatalf("signed out, asked for uncertain: landed on %s", resp.Request.URL)
	}
	resp, page := f.signIn(t, c, "alice", adminToken, "/console/uncertain")
	if resp.Request.URL.Path != "/console/uncertain" || !strings.Contains(page, "Signed in as <strong>alice</strong>") {
		t.Fatalf("after sign-in: %s\n%s", resp.Request.URL, page)
	}
	var session *http.Cookie
	for _, ck := range resp.Request.Response.Cookies() {
		if ck.Name == "tg_console" {
			session = ck
		}
	}
	if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode || session.MaxAge != 3600 {
		t.Fatalf("session cookie: %+v", session)
	}
	if strings.Contains(session.Value, adminToken) || strings.Contains(page, adminToken) {
		t.Fatal("the admin token is in the cookie or the page")
	}

	// Expired: back to sign-in, then to the page asked for.
	f.clock.Add(time.Hour + time.Second)
	resp, _ = get(t, c, f.srv.URL+"/console/tools")
	if resp.Request.URL.Path != "/console/signin" || resp.Request.URL.Query().Get("next") != "/console/tools" {
		t.Fatalf("expired session: landed on %s", resp.Request.URL)
	}
	resp, page = f.signIn(t, c, "alice", adminToken, "/console/tools")
	if resp.Request.URL.Path != "/console/tools" || !strings.Contains(page, "refund") {
		t.Fatalf("after signing in again: %s", resp.Request.URL)
	}
}

func TestSignInNextStaysOnConsole(t *testing.T) {
	f := newFixture(t)
	for _, next := range []string{"https://evil.example/", "//evil.example/console/", "/console/signin", "/elsewhere"} {
		resp, _ := f.signIn(t, f.browser(t), "alice", adminToken, next)
		if resp.Request.URL.Host != strings.TrimPrefix(f.srv.URL, "http://") || resp.Request.URL.Path != "/console/approvals" {
			t.Errorf("next=%q: landed on %s", next, resp.Request.URL)
		}
	}
}
