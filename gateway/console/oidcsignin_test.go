package console_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/toolgateway/toolgateway/gateway/console"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/internal/oidctest"
)

// oidcFixture is a console whose operators sign in through a real
// OpenID provider, where the console is registered as a web client.
func oidcFixture(t *testing.T, allow ...string) (*fixture, *oidctest.Provider) {
	t.Helper()
	op := oidctest.Start(t, "https://gateway.example/mcp")
	clientID := "console-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	f := newFixtureWith(t, func(o *console.Options, base string) {
		op.RegisterWebClient(clientID, "console-secret", base+"/console/oidc/callback")
		o.OIDC = &console.OIDC{Issuer: op.Issuer, ClientID: clientID, ClientSecret: "console-secret", RedirectURL: base + "/console/oidc/callback", Allow: allow}
	})
	return f, op
}

var (
	loginIDRE   = regexp.MustCompile(`name="id" value="([^"]+)"`)
	oidcLinkRE  = regexp.MustCompile(`id="oidc-signin" href="([^"]+)"`)
	continueURL = regexp.MustCompile(`id="continue" href="([^"]+)"`)
)

// oidcSignIn follows the sign-in page's provider link, posts the
// provider's login form as the example user, and follows the page the
// callback answers with; it returns the last response and page.
func oidcSignIn(t *testing.T, f *fixture, op *oidctest.Provider, c *http.Client, next string) (*http.Response, string) {
	t.Helper()
	_, page := get(t, c, f.srv.URL+"/console/signin?next="+url.QueryEscape(next))
	m := oidcLinkRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the sign-in page offers no identity provider:\n%s", page)
	}
	resp, login := get(t, c, f.srv.URL+strings.ReplaceAll(m[1], "&amp;", "&"))
	if !strings.HasPrefix(resp.Request.URL.String(), op.Issuer) {
		t.Fatalf("the start did not lead to the provider: %s", resp.Request.URL)
	}
	id := loginIDRE.FindStringSubmatch(login)
	if id == nil {
		t.Fatalf("no login form at the provider:\n%s", login)
	}
	resp, page = post(t, c, strings.TrimSuffix(op.Issuer, "/")+"/login/username", url.Values{"id": {id[1]}, "username": {op.Username()}, "password": {oidctest.UserPassword}})
	if m := continueURL.FindStringSubmatch(page); m != nil && resp.StatusCode == http.StatusOK {
		if !strings.Contains(page, `http-equiv="refresh"`) {
			t.Fatalf("the signed-in page does not move on by itself:\n%s", page)
		}
		return get(t, c, f.srv.URL+m[1])
	}
	return resp, page
}

func TestOIDCSignInThenDecideCarriesThePerson(t *testing.T) {
	f, op := oidcFixture(t)
	c := f.browser(t)
	resp, page := oidcSignIn(t, f, op, c, "/console/approvals")
	by := oidctest.UserName + " (" + oidctest.UserSubject + ")"
	if resp.Request.URL.Path != "/console/approvals" || !strings.Contains(page, "Signed in as <strong>"+by+"</strong>") {
		t.Fatalf("after the provider: %d %s\n%s", resp.StatusCode, resp.Request.URL, page)
	}
	id := f.pendingApproval(t, "k-oidc", `{"amount":2000}`, "big refund")
	_, page = get(t, c, f.srv.URL+"/console/approvals")
	if resp, _ := post(t, c, f.srv.URL+"/console/approvals/"+id+"/decide", url.Values{"csrf": {csrfOf(t, page)}, "action": {"approve"}}); resp.StatusCode != http.StatusOK {
		t.Fatalf("approve: %d", resp.StatusCode)
	}
	rec, err := f.store.GetApproval(context.Background(), id)
	// The decision names the verified principal, oidc:<issuer host>:<sub>,
	// never a display name.
	if err != nil || rec.State != idempotency.StateApproved || rec.Approval.DecidedBy != "oidc:"+strings.TrimPrefix(strings.TrimPrefix(strings.TrimSuffix(op.Issuer, "/"), "http://"), "https://")+":"+oidctest.UserSubject {
		t.Fatalf("after approve: %v %+v %v", rec.State, rec.Approval, err)
	}
	// The admin token still signs in beside the provider.
	if resp, _ := f.signIn(t, f.browser(t), "bob", adminToken, "/console/tools"); resp.Request.URL.Path != "/console/tools" {
		t.Fatalf("admin-token sign-in next to OIDC: %s", resp.Request.URL)
	}
}

func TestOIDCSignInAllowList(t *testing.T) {
	t.Run("by email", func(t *testing.T) {
		f, op := oidcFixture(t, oidctest.UserEmail)
		resp, _ := oidcSignIn(t, f, op, f.browser(t), "/console/tools")
		if resp.Request.URL.Path != "/console/tools" {
			t.Fatalf("an allowed email: landed on %s", resp.Request.URL)
		}
	})
	t.Run("not listed", func(t *testing.T) {
		f, op := oidcFixture(t, "someone-else@example.com", "id2")
		c := f.browser(t)
		resp, page := oidcSignIn(t, f, op, c, "/console/tools")
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(page, "not allowed") {
			t.Fatalf("a person not on the list: %d\n%s", resp.StatusCode, page)
		}
		if resp, _ := get(t, c, f.srv.URL+"/console/tools"); resp.Request.URL.Path != "/console/signin" {
			t.Fatalf("refused person reached %s", resp.Request.URL)
		}
	})
}

func TestOIDCCallbackRefusesForeignState(t *testing.T) {
	f, _ := oidcFixture(t)
	c := f.browser(t)
	// A callback this browser did not start (login CSRF): refused, no session.
	resp, page := get(t, c, f.srv.URL+"/console/oidc/callback?code=abc&state=forged")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, "did not start here") {
		t.Fatalf("foreign callback: %d\n%s", resp.StatusCode, page)
	}
	if resp, _ := get(t, c, f.srv.URL+"/console/approvals"); resp.Request.URL.Path != "/console/signin" {
		t.Fatalf("after a foreign callback the browser reached %s", resp.Request.URL)
	}
}
