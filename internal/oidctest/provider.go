// Package oidctest starts a real OpenID provider for tests: zitadel/oidc's
// example OP (built on its certified op package) on a loopback listener,
// configured the way an operator configures theirs for the gateway — JWT
// access tokens for the gateway's audience, a tenant claim, keys that
// rotate. Tokens come from its token endpoint through a real OAuth client
// (golang.org/x/oauth2's client credentials flow); nothing here signs a
// token itself.
package oidctest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/oauth2/clientcredentials"
)

// The example OP's service user for the client credentials grant
// ([Provider.Token]; programs in other languages use them at the token
// endpoint, as internal/cmd/testop prints them).
const (
	ServiceClientID     = "sid1"
	ServiceClientSecret = "verysecret"
)

// Scope prefixes the provider maps to claims, as an operator's provider
// maps a user's organisation: scope "org:acme" puts org_id "acme" in the
// access token, "name:Ada" puts name "Ada".
const (
	OrgScopePrefix  = "org:"
	NameScopePrefix = "name:"
	// SubjectScopePrefix makes a client credentials token speak for
	// another person: "person:bob" puts sub "bob" in it (the service
	// user's id otherwise), so one provider can stand for many people.
	SubjectScopePrefix = "person:"
	TenantClaim        = "org_id"
)

// Provider is a running OpenID provider.
type Provider struct {
	// Issuer is its issuer URL (with the trailing slash it serves).
	Issuer string
	// Server is the listener; Close it to make the issuer unreachable.
	Server *httptest.Server
	store  *store
}

// Start runs a provider whose access tokens are JWTs for audience; it
// stops when the test ends.
func Start(t testing.TB, audience string) *Provider {
	t.Helper()
	p := serve(httptest.NewUnstartedServer(nil), audience)
	t.Cleanup(p.Server.Close)
	return p
}

// Listen runs a provider on addr (host:port; port 0 picks one) for a
// program outside Go's tests (internal/cmd/testop); Close its Server to
// stop it.
func Listen(addr, audience string) (*Provider, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("oidctest: listen: %w", err)
	}
	return serve(&httptest.Server{Listener: l, Config: &http.Server{ReadHeaderTimeout: 10 * time.Second}}, audience), nil
}

func serve(srv *httptest.Server, audience string) *Provider {
	issuer := "http://" + srv.Listener.Addr().(*net.TCPAddr).String() + "/"
	st := &store{Storage: storage.NewStorage(withPeople(storage.NewUserStore(issuer))), audience: audience, jwtClients: map[string]bool{}}
	st.rotate()
	// SetupServer makes its logger the process's default (the example's
	// request log): a discarding one keeps test output readable.
	srv.Config.Handler = exampleop.SetupServer(issuer, st, slog.New(slog.DiscardHandler), false, op.WithAllowInsecure())
	srv.Start()
	return &Provider{Issuer: issuer, Server: srv, store: st}
}

// Token gets an access token from the provider's token endpoint with the
// given scopes (see OrgScopePrefix).
func (p *Provider) Token(t testing.TB, scopes ...string) string {
	t.Helper()
	cfg := clientcredentials.Config{
		ClientID: ServiceClientID, ClientSecret: ServiceClientSecret,
		TokenURL: strings.TrimSuffix(p.Issuer, "/") + "/oauth/token",
		Scopes:   scopes,
	}
	tok, err := cfg.Token(context.Background())
	if err != nil {
		t.Fatalf("oidctest: token: %v", err)
	}
	return tok.AccessToken
}

// RotateKeys makes the provider sign with a new key (a new key id) and
// publish only that one, as a provider does after retiring a key.
func (p *Provider) RotateKeys() { p.store.rotate() }

// KeyID is the id of the key the provider signs with now.
func (p *Provider) KeyID() string { return p.store.signing().id }

// store is the example OP's storage, with JWT access tokens, the gateway's
// audience, claims from scopes and a rotating signing key.
type store struct {
	*storage.Storage
	audience string

	mu  sync.Mutex
	key *signingKey
	// jwtClients are the web clients whose code-flow access tokens are
	// JWTs for the audience (RegisterResourceClient).
	jwtClients map[string]bool
}

func (s *store) rotate() {
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.key = &signingKey{id: rand.Text()[:12], key: priv}
}

func (s *store) signing() *signingKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.key
}

// ClientCredentials returns the service user as a client whose access
// tokens are JWTs.
func (s *store) ClientCredentials(ctx context.Context, id, secret string) (op.Client, error) {
	c, err := s.Storage.ClientCredentials(ctx, id, secret)
	if err != nil {
		return nil, err
	}
	return jwtClient{c}, nil
}

// ClientCredentialsTokenRequest addresses the token to the gateway.
func (s *store) ClientCredentialsTokenRequest(ctx context.Context, id string, scopes []string) (op.TokenRequest, error) {
	req, err := s.Storage.ClientCredentialsTokenRequest(ctx, id, scopes)
	if err != nil {
		return nil, err
	}
	if jr, ok := req.(*oidc.JWTTokenRequest); ok {
		jr.Audience = []string{s.audience}
		for _, scope := range scopes {
			if sub, ok := strings.CutPrefix(scope, SubjectScopePrefix); ok {
				jr.Subject = sub
			}
		}
	}
	return req, nil
}

// GetPrivateClaimsFromScopes adds the claims the scopes name.
func (s *store) GetPrivateClaimsFromScopes(ctx context.Context, userID, clientID string, scopes []string) (map[string]any, error) {
	claims, err := s.Storage.GetPrivateClaimsFromScopes(ctx, userID, clientID, scopes)
	if err != nil {
		return nil, err
	}
	if claims == nil {
		claims = map[string]any{}
	}
	for _, scope := range scopes {
		if org, ok := strings.CutPrefix(scope, OrgScopePrefix); ok {
			claims[TenantClaim] = org
		}
		if name, ok := strings.CutPrefix(scope, NameScopePrefix); ok {
			claims["name"] = name
		}
	}
	return claims, nil
}

// GetClientByClientID gives the resource clients JWT access tokens and
// lets them ask for the claim scopes.
func (s *store) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	c, err := s.Storage.GetClientByClientID(ctx, id)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	resource := s.jwtClients[id]
	s.mu.Unlock()
	if resource {
		return resourceClient{c}, nil
	}
	return c, nil
}

// AuthRequestByCode addresses a resource client's code-flow access token
// to the gateway as well as to the client.
func (s *store) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	req, err := s.Storage.AuthRequestByCode(ctx, code)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	resource := s.jwtClients[req.GetClientID()]
	s.mu.Unlock()
	if resource {
		return audienceRequest{req, s.audience}, nil
	}
	return req, nil
}

func (s *store) SigningKey(context.Context) (op.SigningKey, error) { return s.signing(), nil }

func (s *store) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

func (s *store) KeySet(context.Context) ([]op.Key, error) {
	return []op.Key{publicKey{s.signing()}}, nil
}

type jwtClient struct{ op.Client }

// resourceClient is a web client whose access tokens are JWTs and who may
// ask for the claim scopes (org:…, name:…).
type resourceClient struct{ op.Client }

func (resourceClient) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeJWT }
func (c resourceClient) IsScopeAllowed(scope string) bool {
	return strings.HasPrefix(scope, OrgScopePrefix) || strings.HasPrefix(scope, NameScopePrefix) || c.Client.IsScopeAllowed(scope)
}

// audienceRequest adds the gateway to an auth request's audience.
type audienceRequest struct {
	op.AuthRequest
	audience string
}

func (r audienceRequest) GetAudience() []string {
	return append(r.AuthRequest.GetAudience(), r.audience)
}

func (jwtClient) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeJWT }

type signingKey struct {
	id  string
	key *rsa.PrivateKey
}

func (k *signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k *signingKey) Key() any                                    { return k.key }
func (k *signingKey) ID() string                                  { return k.id }

type publicKey struct{ *signingKey }

func (k publicKey) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k publicKey) Use() string                        { return "sig" }
func (k publicKey) Key() any                           { return &k.key.PublicKey }

// The example OP's first user, whose profile names "Test User" and whose
// verified email is UserEmail; its username is "test-user@" + the
// issuer's host name ([Provider.Username]).
const (
	UserSubject  = "id1"
	UserPassword = "verysecure"
	UserEmail    = "test-user@zitadel.ch"
	UserName     = "Test User"
)

// Username is the first user's login name at this provider.
func (p *Provider) Username() string {
	host := strings.TrimPrefix(p.Issuer, "http://")
	host, _, _ = strings.Cut(host, ":")
	return "test-user@" + host
}

// RegisterWebClient registers a confidential web client (authorization
// code, client_secret_basic) that may redirect to redirectURL, as an
// operator registers the console at their provider. Client ids are global
// to the example OP: give each test its own.
func (p *Provider) RegisterWebClient(id, secret, redirectURL string) {
	storage.RegisterClients(storage.WebClient(id, secret, redirectURL))
}

// RegisterResourceClient registers a web client as an MCP host is one: its
// authorization-code access tokens are JWTs for the gateway's audience,
// with the claims of the scopes it asks for (org:acme → org_id acme).
func (p *Provider) RegisterResourceClient(id, secret, redirectURL string) {
	p.RegisterWebClient(id, secret, redirectURL)
	p.store.mu.Lock()
	p.store.jwtClients[id] = true
	p.store.mu.Unlock()
}
