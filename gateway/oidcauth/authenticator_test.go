package oidcauth_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/toolgateway/toolgateway/gateway/oidcauth"
	"github.com/toolgateway/toolgateway/internal/oidctest"
)

const audience = "https://gateway.example.com/mcp"

// newAuth returns an Authenticator of p's tokens (tenant from org_id).
func newAuth(t *testing.T, p *oidctest.Provider, opts oidcauth.Options) *oidcauth.Authenticator {
	t.Helper()
	a, err := oidcauth.New(oidcauth.Config{Issuer: p.Issuer, Audience: audience, TenantClaim: oidctest.TenantClaim}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func wantInvalid(t *testing.T, a *oidcauth.Authenticator, token, what string) {
	t.Helper()
	id, err := a.Verify(t.Context(), token)
	if !errors.Is(err, oidcauth.ErrInvalidToken) {
		t.Fatalf("%s: got %+v, %v; want ErrInvalidToken", what, id, err)
	}
	if strings.Contains(err.Error(), token) {
		t.Fatalf("%s: the error carries the token", what)
	}
}

func TestTokensOfTheProviderNameTheirTenant(t *testing.T) {
	p := oidctest.Start(t, audience)
	a := newAuth(t, p, oidcauth.Options{})
	for _, tenant := range []string{"acme", "globex"} {
		id, err := a.Verify(t.Context(), p.Token(t, oidctest.OrgScopePrefix+tenant, oidctest.NameScopePrefix+"Ada"))
		if err != nil {
			t.Fatalf("%s: %v", tenant, err)
		}
		if id.Tenant != tenant || id.Subject == "" || id.Name != "Ada" || !id.Expiry.After(time.Now()) {
			t.Fatalf("%s: identity %+v", tenant, id)
		}
	}
	if err := a.Ready(); err != nil {
		t.Fatalf("ready after discovery: %v", err)
	}
}

func TestFixedTenant(t *testing.T) {
	p := oidctest.Start(t, audience)
	a, err := oidcauth.New(oidcauth.Config{Issuer: p.Issuer, Audience: audience, Tenant: "acme"}, oidcauth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	id, err := a.Verify(t.Context(), p.Token(t))
	if err != nil || id.Tenant != "acme" {
		t.Fatalf("got %+v, %v", id, err)
	}
}

func TestKeyRotation(t *testing.T) {
	p := oidctest.Start(t, audience)
	fetches := countingClient("/keys")
	start := time.Now()
	var elapsed atomic.Int64
	a := newAuth(t, p, oidcauth.Options{HTTPClient: fetches.client, Now: func() time.Time { return start.Add(time.Duration(elapsed.Load())) }})
	before := p.Token(t, "org:acme")
	if _, err := a.Verify(t.Context(), before); err != nil {
		t.Fatal(err)
	}
	oldKey := p.KeyID()
	p.RotateKeys()
	after := p.Token(t, "org:acme")
	if p.KeyID() == oldKey {
		t.Fatal("the provider did not rotate")
	}
	// The new key id is unknown: one refresh of the key set finds it, once
	// the last fetch is older than the refresh interval.
	elapsed.Store(int64(oidcauth.DefaultMinRefreshInterval))
	n := fetches.n.Load()
	if _, err := a.Verify(t.Context(), after); err != nil {
		t.Fatalf("token signed with the new key: %v", err)
	}
	if got := fetches.n.Load() - n; got != 1 {
		t.Fatalf("%d key set fetches for the new key id, want 1", got)
	}
	// A gateway that never saw the old token refuses it: its key is gone.
	fresh := newAuth(t, p, oidcauth.Options{})
	wantInvalid(t, fresh, before, "token of the retired key")
}

func TestUnknownKeyIDsRefreshAtMostOncePerInterval(t *testing.T) {
	p := oidctest.Start(t, audience)
	fetches := countingClient("/keys")
	a := newAuth(t, p, oidcauth.Options{HTTPClient: fetches.client, MinRefreshInterval: time.Hour})
	if _, err := a.Verify(t.Context(), p.Token(t, "org:acme")); err != nil {
		t.Fatal(err)
	}
	n := fetches.n.Load()
	stranger := oidctest.Start(t, audience).Token(t, "org:acme")
	for i := range 20 {
		wantInvalid(t, a, withKeyID(stranger, "made-up-"+string(rune('a'+i))), "unknown key id")
	}
	if got := fetches.n.Load() - n; got > 1 {
		t.Fatalf("%d key set fetches for 20 tokens with unknown key ids, want at most 1", got)
	}
}

func TestRefusedTokens(t *testing.T) {
	p := oidctest.Start(t, audience)
	other := oidctest.Start(t, audience)
	valid := p.Token(t, "org:acme")
	header, payload, _ := strings.Cut(valid, ".")
	payload, _, _ = strings.Cut(payload, ".")
	hour := 2 * time.Hour

	cases := []struct {
		name  string
		auth  func() *oidcauth.Authenticator
		token string
	}{
		{"expired", func() *oidcauth.Authenticator {
			return newAuth(t, p, oidcauth.Options{Now: func() time.Time { return time.Now().Add(hour) }})
		}, valid},
		{"not yet valid", func() *oidcauth.Authenticator {
			return newAuth(t, p, oidcauth.Options{Now: func() time.Time { return time.Now().Add(-hour) }})
		}, valid},
		{"another issuer", func() *oidcauth.Authenticator { return newAuth(t, p, oidcauth.Options{}) }, other.Token(t, "org:acme")},
		{"another audience", func() *oidcauth.Authenticator {
			a, err := oidcauth.New(oidcauth.Config{Issuer: p.Issuer, Audience: "https://other.example.com/", TenantClaim: oidctest.TenantClaim}, oidcauth.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return a
		}, valid},
		{"alg none", func() *oidcauth.Authenticator { return newAuth(t, p, oidcauth.Options{}) },
			b64(`{"alg":"none","typ":"JWT"}`) + "." + payload + "."},
		{"HMAC signed with the public key", func() *oidcauth.Authenticator { return newAuth(t, p, oidcauth.Options{}) },
			hmacWithPublicKey(t, p, payload)},
		{"no tenant claim", func() *oidcauth.Authenticator { return newAuth(t, p, oidcauth.Options{}) }, p.Token(t)},
		{"malformed tenant claim", func() *oidcauth.Authenticator { return newAuth(t, p, oidcauth.Options{}) }, p.Token(t, "org:Not_A_Tenant")},
		{"over 16 KiB", func() *oidcauth.Authenticator { return newAuth(t, p, oidcauth.Options{}) },
			header + "." + strings.Repeat("A", 16<<10) + ".sig"},
		{"garbage", func() *oidcauth.Authenticator { return newAuth(t, p, oidcauth.Options{}) }, "not-a-jwt"},
		{"tampered payload", func() *oidcauth.Authenticator { return newAuth(t, p, oidcauth.Options{}) },
			header + "." + b64(`{"iss":"`+p.Issuer+`","aud":"`+audience+`","org_id":"acme","exp":9999999999}`) + "." + strings.Split(valid, ".")[2]},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { wantInvalid(t, c.auth(), c.token, c.name) })
	}
}

func TestIssuerUnreachableAtStart(t *testing.T) {
	p := oidctest.Start(t, audience)
	down := &toggleTransport{}
	down.down.Store(true)
	now := time.Now()
	var clock atomic.Int64
	a := newAuth(t, p, oidcauth.Options{
		HTTPClient: &http.Client{Transport: down},
		Now:        func() time.Time { return now.Add(time.Duration(clock.Load())) },
	})
	token := p.Token(t, "org:acme")
	if _, err := a.Verify(t.Context(), token); !errors.Is(err, oidcauth.ErrIssuerUnavailable) {
		t.Fatalf("issuer down: %v; want ErrIssuerUnavailable", err)
	}
	if err := a.Ready(); !errors.Is(err, oidcauth.ErrIssuerUnavailable) {
		t.Fatalf("Ready with the issuer down: %v", err)
	}
	down.down.Store(false)
	// Within the rediscovery interval the gateway does not ask again.
	if _, err := a.Verify(t.Context(), token); !errors.Is(err, oidcauth.ErrIssuerUnavailable) {
		t.Fatalf("before the rediscovery interval: %v", err)
	}
	clock.Store(int64(oidcauth.DefaultRediscoverInterval))
	if id, err := a.Verify(t.Context(), token); err != nil || id.Tenant != "acme" {
		t.Fatalf("issuer back: %+v, %v", id, err)
	}
}

func TestMalformedKeySetIsAnUnavailableIssuer(t *testing.T) {
	p := oidctest.Start(t, audience)
	a := newAuth(t, p, oidcauth.Options{HTTPClient: &http.Client{Transport: &rewriteTransport{path: "/keys", body: `{"keys": 3}`}}})
	if _, err := a.Verify(t.Context(), p.Token(t, "org:acme")); !errors.Is(err, oidcauth.ErrIssuerUnavailable) {
		t.Fatalf("malformed key set: %v; want ErrIssuerUnavailable", err)
	}
}

func TestDialReportsTheKeySet(t *testing.T) {
	p := oidctest.Start(t, audience)
	r, err := newAuth(t, p, oidcauth.Options{}).Dial(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if r.Issuer != p.Issuer || !strings.HasSuffix(r.JWKSURI, "/keys") || len(r.Keys) != 1 || !strings.HasPrefix(r.Keys[0], p.KeyID()) {
		t.Fatalf("dial report %+v", r)
	}
}

func TestConfigValidation(t *testing.T) {
	for _, c := range []struct {
		cfg  oidcauth.Config
		want string
	}{
		{oidcauth.Config{Issuer: "login.example.com", Audience: "a", Tenant: "t"}, "issuer:"},
		{oidcauth.Config{Issuer: "https://login.example.com/", Tenant: "t"}, "audience:"},
		{oidcauth.Config{Issuer: "https://login.example.com/", Audience: "a"}, "tenant_claim or tenant"},
		{oidcauth.Config{Issuer: "https://login.example.com/", Audience: "a", Tenant: "t", TenantClaim: "org"}, "tenant_claim and tenant"},
		{oidcauth.Config{Issuer: "https://login.example.com/", Audience: "a", Tenant: "Bad Name"}, "tenant:"},
	} {
		err := c.cfg.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%+v: %v; want an error starting %q", c.cfg, err, c.want)
		}
	}
}

// b64 is base64url without padding, as in a JWT.
func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// hmacWithPublicKey forges the classic attack: an HS256 token whose secret
// is the issuer's public key (PEM), for verifiers that take the key for an
// HMAC secret.
func hmacWithPublicKey(t *testing.T, p *oidctest.Provider, payload string) string {
	t.Helper()
	set := providerKeys(t, p)
	der, err := x509.MarshalPKIXPublicKey(set.Keys[0].Key)
	if err != nil {
		t.Fatal(err)
	}
	secret := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	signing := b64(`{"alg":"HS256","typ":"JWT","kid":"`+set.Keys[0].KeyID+`"}`) + "." + payload
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(signing))
	return signing + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// withKeyID is token with its header's key id replaced: a key id the
// issuer never had.
func withKeyID(token, kid string) string {
	parts := strings.Split(token, ".")
	parts[0] = b64(`{"alg":"RS256","typ":"JWT","kid":"` + kid + `"}`)
	return strings.Join(parts, ".")
}

func providerKeys(t *testing.T, p *oidctest.Provider) jose.JSONWebKeySet {
	t.Helper()
	resp, err := http.Get(strings.TrimSuffix(p.Issuer, "/") + "/keys")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil || len(set.Keys) == 0 {
		t.Fatalf("provider keys: %v", err)
	}
	return set
}

// counting counts the requests to one path of the provider.
type counting struct {
	n      atomic.Int64
	client *http.Client
}

func countingClient(path string) *counting {
	c := &counting{}
	c.client = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.URL.Path == path {
			c.n.Add(1)
		}
		return http.DefaultTransport.RoundTrip(r)
	})}
	return c
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// toggleTransport fails every request while down, as an unreachable
// issuer does.
type toggleTransport struct{ down atomic.Bool }

func (t *toggleTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.down.Load() {
		return nil, errors.New("connection refused (test)")
	}
	return http.DefaultTransport.RoundTrip(r)
}

// rewriteTransport replaces the body of the answers for one path.
type rewriteTransport struct{ path, body string }

func (t *rewriteTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || r.URL.Path != t.path {
		return resp, err
	}
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(strings.NewReader(t.body))
	resp.ContentLength = int64(len(t.body))
	return resp, nil
}

// Tokens that arrive while the start's discovery is still asking the
// provider wait for it and verify, rather than being refused as if the
// provider were down (a 401 that sends a host to sign in again).
func TestTokensDuringDiscoveryWaitForIt(t *testing.T) {
	p := oidctest.Start(t, audience)
	release := make(chan struct{})
	asked := make(chan struct{}, 1)
	slow := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if strings.HasSuffix(r.URL.Path, "/.well-known/openid-configuration") {
			select {
			case asked <- struct{}{}:
			default:
			}
			<-release
		}
		return http.DefaultTransport.RoundTrip(r)
	})}
	a := newAuth(t, p, oidcauth.Options{HTTPClient: slow})
	a.Start(t.Context())
	<-asked // the start's discovery is under way
	const tokens = 8
	errs := make(chan error, tokens)
	for i := range tokens {
		token := p.Token(t, fmt.Sprintf("org:acme-%d", i))
		go func() {
			_, err := a.Verify(t.Context(), token)
			errs <- err
		}()
	}
	close(release)
	for range tokens {
		if err := <-errs; err != nil {
			t.Fatalf("a token verified during discovery: %v", err)
		}
	}
	// A request that gives up waiting is told the provider was being
	// asked, not that its token is bad.
	b := newAuth(t, p, oidcauth.Options{HTTPClient: &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		<-r.Context().Done()
		return nil, r.Context().Err()
	})}})
	ctx, cancel := context.WithCancel(t.Context())
	b.Start(ctx)
	waiting, stop := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer stop()
	if _, err := b.Verify(waiting, p.Token(t, "org:acme")); !errors.Is(err, oidcauth.ErrIssuerUnavailable) || errors.Is(err, oidcauth.ErrInvalidToken) {
		t.Fatalf("gave up waiting: %v; want ErrIssuerUnavailable", err)
	}
	cancel()
}
