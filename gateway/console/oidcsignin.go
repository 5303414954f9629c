package console

import (
	"github.com/toolgateway/toolgateway/gateway/principal"

	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// OIDC signs operators in through the identity provider (authorization
// code + PKCE): the approvals they decide carry their name and subject.
type OIDC struct {
	// Issuer is the provider's issuer URL (discovery is at
	// Issuer/.well-known/openid-configuration).
	Issuer string
	// ClientID and ClientSecret are the console's client at the provider.
	ClientID, ClientSecret string
	// RedirectURL is the console's callback as the browser reaches it:
	// https://admin.example.com/console/oidc/callback.
	RedirectURL string
	// Scopes are asked for besides "openid"; nil means profile and email.
	Scopes []string
	// Allow lists the people who may sign in, by email (verified) or
	// subject; empty lets in every user of the issuer.
	Allow []string
	// HTTPClient reaches the provider; nil means a client with a 10 s
	// timeout, so a provider that hangs cannot hold sign-ins forever.
	HTTPClient *http.Client
}

// oidcCookie carries one sign-in attempt between the redirect to the
// provider and its callback. It is SameSite=Lax (not Strict): the callback
// is a top-level navigation from the provider's origin.
const oidcCookie = "tg_console_oidc"

// oidcAttemptTTL bounds how long a person may take at the provider.
const oidcAttemptTTL = 10 * time.Minute

// oidcAttempt is what the attempt cookie carries, signed with the session
// key: nothing in it is kept on the server.
type oidcAttempt struct {
	State    string `json:"state"`
	Verifier string `json:"verifier"`
	Nonce    string `json:"nonce"`
	Next     string `json:"next"`
	Expires  int64  `json:"exp"`
}

// oidcClient is the console's OAuth client, discovered on first use (so a
// provider that is down at start does not stop the gateway).
type oidcClient struct {
	cfg OIDC

	mu       sync.Mutex
	oauth    *oauth2.Config
	verifier *oidc.IDTokenVerifier
	provider *oidc.Provider
}

func (o *oidcClient) ctx(ctx context.Context) context.Context {
	return oidc.ClientContext(ctx, o.cfg.HTTPClient)
}

// discover returns the OAuth config and ID token verifier, discovering the
// provider once.
func (o *oidcClient) discover(ctx context.Context) (*oauth2.Config, *oidc.IDTokenVerifier, *oidc.Provider, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.oauth != nil {
		return o.oauth, o.verifier, o.provider, nil
	}
	p, err := oidc.NewProvider(o.ctx(ctx), o.cfg.Issuer)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("console: discovering the identity provider: %w", err)
	}
	scopes := o.cfg.Scopes
	if scopes == nil {
		scopes = []string{"profile", "email"}
	}
	o.oauth = &oauth2.Config{
		ClientID: o.cfg.ClientID, ClientSecret: o.cfg.ClientSecret, RedirectURL: o.cfg.RedirectURL,
		Endpoint: p.Endpoint(), Scopes: append([]string{oidc.ScopeOpenID}, scopes...),
	}
	o.verifier = p.Verifier(&oidc.Config{ClientID: o.cfg.ClientID})
	o.provider = p
	return o.oauth, o.verifier, o.provider, nil
}

// handleOIDCStart sends the browser to the provider with a fresh state,
// PKCE verifier and nonce, kept in a signed short-lived cookie.
func (c *Console) handleOIDCStart(w http.ResponseWriter, r *http.Request) {
	source, now := clientAddress(r), c.opts.Now()
	if wait := c.throttle.wait(source, now); wait > 0 {
		c.tooMany(w, r, source, wait, signInView{Next: safeNext(r.URL.Query().Get("next"))})
		return
	}
	c.throttle.spend(source, now)
	cfg, _, _, err := c.oidc.discover(r.Context())
	if err != nil {
		c.opts.Log.ErrorContext(r.Context(), "console: OIDC sign-in unavailable", "error", err)
		msg := "The identity provider cannot be reached now. Try again in a moment."
		if !c.opts.TokenSignInOff {
			msg = "The identity provider cannot be reached now. Try again, or sign in with the admin token."
		}
		c.renderSignIn(w, r, http.StatusBadGateway, signInView{Next: safeNext(r.URL.Query().Get("next")), Message: msg})
		return
	}
	a := oidcAttempt{State: rand.Text(), Verifier: oauth2.GenerateVerifier(), Nonce: rand.Text(), Next: safeNext(r.URL.Query().Get("next")), Expires: c.opts.Now().Add(oidcAttemptTTL).Unix()}
	value, err := c.signValue(a)
	if err != nil {
		http.Error(w, "cannot start the sign-in", http.StatusInternalServerError)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: oidcCookie, Value: value, Path: Base + "/", HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: c.opts.Secure || r.TLS != nil, MaxAge: int(oidcAttemptTTL.Seconds())})
	http.Redirect(w, r, cfg.AuthCodeURL(a.State, oauth2.S256ChallengeOption(a.Verifier), oidc.Nonce(a.Nonce)), http.StatusFound)
}

// handleOIDCCallback finishes a sign-in: the state matches the attempt,
// the code is exchanged with its PKCE verifier, the ID token is verified
// (issuer, audience = client id, expiry, nonce), the person is allowed, and
// a session starts under their name and subject.
func (c *Console) handleOIDCCallback(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: oidcCookie, Path: Base + "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	var a oidcAttempt
	if _, ok := c.readSigned(r, oidcCookie, &a); !ok || a.Expires <= c.opts.Now().Unix() || !sameToken(r.URL.Query().Get("state"), a.State) {
		c.renderSignIn(w, r, http.StatusBadRequest, signInView{Message: "That sign-in expired or did not start here. Sign in again."})
		return
	}
	if e := r.URL.Query().Get("error"); e != "" {
		c.renderSignIn(w, r, http.StatusUnauthorized, signInView{Next: a.Next, Message: "The identity provider did not sign you in (" + e + ")."})
		return
	}
	by, who, err := c.oidcPerson(r.Context(), r.URL.Query().Get("code"), a)
	if err != nil {
		c.opts.Log.WarnContext(r.Context(), "console: OIDC sign-in refused", "reason", err.Error())
		c.renderSignIn(w, r, http.StatusForbidden, signInView{Next: a.Next, Message: "You are not signed in: " + err.Error()})
		return
	}
	if err := c.issue(w, r, by, who); err != nil {
		c.opts.Log.ErrorContext(r.Context(), "console: cannot start a session", "error", err)
		http.Error(w, "cannot start a session", http.StatusInternalServerError)
		return
	}
	c.opts.Log.InfoContext(r.Context(), "console: operator signed in through the identity provider", "by", by)
	// A page, not a redirect: the session cookie is SameSite=Strict, and a
	// browser does not send it on a redirect chain that began at the
	// provider's origin; this page's own navigation is same-site.
	c.pages.render(w, http.StatusOK, "signedin", page{Title: "Signed in", Body: a.Next})
}

// errNotAllowed: a person of the issuer who is not on the allow list.
var errNotAllowed = errors.New("your account is not allowed to use this console")

// oidcPerson exchanges the code and returns the session's by (the
// person's name, or preferred_username, or email, and subject) and the
// person's principal, oidc:<issuer host>:<sub> with the ID token's claims.
func (c *Console) oidcPerson(ctx context.Context, code string, a oidcAttempt) (string, principal.Principal, error) {
	cfg, verifier, provider, err := c.oidc.discover(ctx)
	if err != nil {
		return "", principal.Principal{}, err
	}
	ctx = c.oidc.ctx(ctx)
	tok, err := cfg.Exchange(ctx, code, oauth2.VerifierOption(a.Verifier))
	if err != nil {
		return "", principal.Principal{}, errors.New("the identity provider refused the code")
	}
	raw, _ := tok.Extra("id_token").(string)
	idt, err := verifier.Verify(ctx, raw)
	if err != nil {
		return "", principal.Principal{}, fmt.Errorf("the ID token does not verify: %w", err)
	}
	if !sameToken(idt.Nonce, a.Nonce) {
		return "", principal.Principal{}, errors.New("the ID token's nonce is not this sign-in's")
	}
	var p personClaims
	if err := idt.Claims(&p); err != nil {
		return "", principal.Principal{}, fmt.Errorf("reading the ID token: %w", err)
	}
	if p.Name == "" && p.PreferredUsername == "" && p.Email == "" {
		// Providers that keep the profile out of the ID token serve it
		// from userinfo, for the same subject.
		if info, err := provider.UserInfo(ctx, oauth2.StaticTokenSource(tok)); err == nil && info.Subject == idt.Subject {
			_ = info.Claims(&p)
		}
	}
	if len(c.oidc.cfg.Allow) > 0 && !slices.Contains(c.oidc.cfg.Allow, idt.Subject) && !(p.EmailVerified && slices.Contains(c.oidc.cfg.Allow, p.Email)) {
		return "", principal.Principal{}, errNotAllowed
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return "", principal.Principal{}, fmt.Errorf("reading the ID token: %w", err)
	}
	for _, registered := range []string{"iss", "aud", "exp", "iat", "nbf", "nonce", "at_hash", "c_hash", "auth_time", "azp", "sid", "jti"} {
		delete(claims, registered) // the session has its own; they only fill the cookie
	}
	by := p.by(idt.Subject)
	who, err := principal.OIDC(c.oidc.cfg.Issuer, idt.Subject, by, claims)
	if err != nil {
		return "", principal.Principal{}, err
	}
	return by, who, nil
}

// personClaims are the claims that name a person.
type personClaims struct {
	Name              string `json:"name"`
	PreferredUsername string `json:"preferred_username"`
	Email             string `json:"email"`
	EmailVerified     bool   `json:"email_verified"`
}

// by is "Name (subject)", bounded, so two people with one name stay apart.
func (p personClaims) by(subject string) string {
	name := cmp.Or(strings.TrimSpace(p.Name), strings.TrimSpace(p.PreferredUsername), strings.TrimSpace(p.Email))
	by := subject
	if name != "" {
		by = name + " (" + subject + ")"
	}
	if len(by) > maxOperatorName {
		by = by[:maxOperatorName]
	}
	return strings.ToValidUTF8(by, "")
}

// signValue encodes v as a cookie value signed with the session key.
func (c *Console) signValue(v any) (string, error) {
	keys := c.opts.SessionKeys()
	if len(keys) == 0 {
		return "", errors.New("console: no session key")
	}
	payload, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(sign(keys[0], payload)), nil
}

// readSigned decodes a cookie signValue wrote into v, checking its
// signature; key is the session key that signed it.
func (c *Console) readSigned(r *http.Request, name string, v any) (key []byte, ok bool) {
	ck, err := r.Cookie(name)
	if err != nil {
		return nil, false
	}
	payloadText, macText, ok := strings.Cut(ck.Value, ".")
	if !ok {
		return nil, false
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(payloadText)
	mac, err2 := base64.RawURLEncoding.DecodeString(macText)
	if err1 != nil || err2 != nil {
		return nil, false
	}
	for _, key := range c.opts.SessionKeys() {
		if hmac.Equal(mac, sign(key, payload)) {
			return key, json.Unmarshal(payload, v) == nil
		}
	}
	return nil, false
}
