package console

import (
	"github.com/toolgateway/toolgateway/gateway/principal"

	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strings"
	"time"
)

// signInView is the sign-in page's data.
type signInView struct {
	CSRF, Next, Name, Message string
	// OIDC offers sign-in through the identity provider.
	OIDC bool
	// Token offers sign-in with the admin token.
	Token bool
}

// maxOperatorName bounds the name an operator signs in with (it is
// recorded on every decision).
const maxOperatorName = 200

// handleSignInPage shows the sign-in form. Sign-in has no session yet, so
// its CSRF token is a random value in a cookie and the form (double
// submit): another origin can neither read the cookie nor set it.
func (c *Console) handleSignInPage(w http.ResponseWriter, r *http.Request) {
	c.renderSignIn(w, r, http.StatusOK, signInView{Next: safeNext(r.URL.Query().Get("next"))})
}

func (c *Console) renderSignIn(w http.ResponseWriter, r *http.Request, status int, v signInView) {
	token := ""
	if ck, err := r.Cookie(signInCookie); err == nil && len(ck.Value) == 32 {
		token = ck.Value
	} else {
		b := make([]byte, 16)
		if _, err := rand.Read(b); err != nil {
			http.Error(w, "cannot make a sign-in form", http.StatusInternalServerError)
			return
		}
		token = hex.EncodeToString(b)
		c.setCookie(w, r, signInCookie, token, time.Hour)
	}
	v.CSRF = token
	v.OIDC = c.oidc != nil
	v.Token = !c.opts.TokenSignInOff
	c.pages.render(w, status, "signin", page{Title: "Sign in", Body: v})
}

// handleSignIn checks the admin token and the operator's name and starts a
// session. A wrong token stays on the sign-in page with a message; the
// token is never echoed back.
func (c *Console) handleSignIn(w http.ResponseWriter, r *http.Request) {
	if c.opts.TokenSignInOff {
		http.Error(w, "403 forbidden: sign-in with the admin token is off on this console (console.token_sign_in); sign in through the identity provider", http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	ck, cookieErr := r.Cookie(signInCookie)
	if err := r.ParseForm(); err != nil || cookieErr != nil || !sameToken(r.PostForm.Get(csrfField), ck.Value) {
		http.Error(w, "403 forbidden: the sign-in form's CSRF token is missing or wrong; reload the page", http.StatusForbidden)
		return
	}
	next := safeNext(r.PostForm.Get("next"))
	name := strings.TrimSpace(r.PostForm.Get("name"))
	v := signInView{Next: next, Name: name}
	source, now := clientAddress(r), c.opts.Now()
	if wait := c.throttle.wait(source, now); wait > 0 {
		c.tooMany(w, r, source, wait, v)
		return
	}
	switch {
	case name == "" || len(name) > maxOperatorName:
		v.Message = "Enter your name (up to 200 characters): it is recorded on every decision you take."
		c.renderSignIn(w, r, http.StatusBadRequest, v)
		return
	case !c.opts.Authenticate(r.PostForm.Get("token")):
		c.throttle.spend(source, now)
		v.Message = "That token is not the admin token. Check it and try again."
		c.opts.Log.WarnContext(r.Context(), "console: sign-in with a wrong admin token", "source", source)
		c.renderSignIn(w, r, http.StatusUnauthorized, v)
		return
	}
	if err := c.issue(w, r, name, principal.Admin); err != nil {
		c.opts.Log.ErrorContext(r.Context(), "console: cannot start a session", "error", err)
		http.Error(w, "cannot start a session", http.StatusInternalServerError)
		return
	}
	c.setCookie(w, r, signInCookie, "", -1)
	c.opts.Log.InfoContext(r.Context(), "console: operator signed in", "by", name)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// handleSignOut ends the session in this browser. The cookie is signed,
// not stored, so a copy of it stays valid until it expires.
func (c *Console) handleSignOut(w http.ResponseWriter, r *http.Request) {
	c.setCookie(w, r, sessionCookie, "", -1)
	http.Redirect(w, r, Base+"/signin", http.StatusSeeOther)
}
