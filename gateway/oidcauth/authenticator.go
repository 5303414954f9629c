package oidcauth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
)

// ErrInvalidToken is a token the gateway does not accept: malformed, not
// signed by the issuer, expired or not yet valid, for another issuer or
// audience, or without a valid tenant. The REST and MCP answer is 401.
var ErrInvalidToken = errors.New("invalid access token")

// ErrIssuerUnavailable is a token that could not be checked because the
// issuer's discovery document or key set could not be had yet. The answer
// is 503 with Retry-After: the same token may succeed later.
var ErrIssuerUnavailable = errors.New("the identity provider is unavailable")

// Options tunes an [Authenticator]; the zero value takes the defaults.
type Options struct {
	// HTTPClient fetches the discovery document and the key set (default:
	// a client with a 10 s timeout).
	HTTPClient *http.Client
	// Logger receives discovery failures (never a token).
	Logger *slog.Logger
	// Now is the clock (default time.Now); tests move it.
	Now func() time.Time
	// MaxTokenBytes refuses longer tokens before parsing them
	// (DefaultMaxTokenBytes).
	MaxTokenBytes int
	// MinRefreshInterval is the least time between two fetches of the key
	// set for unknown key ids (DefaultMinRefreshInterval).
	MinRefreshInterval time.Duration
	// RediscoverInterval is the least time between two discovery attempts
	// while the issuer does not answer (DefaultRediscoverInterval).
	RediscoverInterval time.Duration
	// ExpirySkew is how long after its exp a token is still accepted, for
	// clocks that differ (DefaultExpirySkew). go-oidc accepts nbf up to 5
	// minutes ahead.
	ExpirySkew time.Duration
	// CacheEntries bounds the verified-token cache (DefaultCacheEntries).
	CacheEntries int
}

func (o Options) withDefaults() Options {
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxTokenBytes <= 0 {
		o.MaxTokenBytes = DefaultMaxTokenBytes
	}
	if o.MinRefreshInterval <= 0 {
		o.MinRefreshInterval = DefaultMinRefreshInterval
	}
	if o.RediscoverInterval <= 0 {
		o.RediscoverInterval = DefaultRediscoverInterval
	}
	if o.ExpirySkew <= 0 {
		o.ExpirySkew = DefaultExpirySkew
	}
	if o.CacheEntries <= 0 {
		o.CacheEntries = DefaultCacheEntries
	}
	return o
}

// Identity is who a valid token speaks for.
type Identity struct {
	// Tenant is the gateway tenant: the tenant claim's value, or the
	// configured fixed tenant.
	Tenant string
	// Subject is the token's sub.
	Subject string
	// Name is the token's name, preferred_username or email claim, the
	// first present ("" when none).
	Name string
	// Expiry is the token's exp.
	Expiry time.Time
	// Issuer is the token's iss (the configured issuer).
	Issuer string
	// Claims are the token's claims, for decide rules' approvers
	// expressions; read only, shared by every request of the token.
	Claims map[string]any
}

// Authenticator validates one issuer's access tokens. It is safe for
// concurrent use; a configuration reload builds a new one.
type Authenticator struct {
	cfg   Config
	opts  Options
	cache *tokenCache

	state atomic.Pointer[discovered]
	// discovering holds a token while a discovery runs: one at a time,
	// and a token that arrives meanwhile waits for its outcome (bounded
	// by its request's context) rather than being refused while the
	// provider is being asked.
	discovering chan struct{}
	lastTry     time.Time // guarded by discovering
	lastErr     atomic.Pointer[error]
}

// discovered is what discovery found: the issuer's key set and the claims
// verifier over it.
type discovered struct {
	jwksURI  string
	keys     *keySet
	verifier *oidc.IDTokenVerifier
}

// New returns an Authenticator for cfg. It makes no request: discovery
// happens on the first token or at [Authenticator.Start].
func New(cfg Config, opts Options) (*Authenticator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	return &Authenticator{cfg: cfg, opts: opts, cache: newTokenCache(opts.CacheEntries), discovering: make(chan struct{}, 1)}, nil
}

// Config returns the configuration the Authenticator enforces.
func (a *Authenticator) Config() Config { return a.cfg }

// Start tries discovery in the background, so the first token need not
// wait for it; a failure is logged and retried on demand.
func (a *Authenticator) Start(ctx context.Context) {
	go func() { _, _ = a.discover(ctx) }()
}

// Ready is nil once the issuer's discovery document and key set were had,
// otherwise the reason they were not (for /readyz).
func (a *Authenticator) Ready() error {
	if a.state.Load() != nil {
		return nil
	}
	if err := a.lastErr.Load(); err != nil {
		return *err
	}
	return fmt.Errorf("%w: not discovered yet", ErrIssuerUnavailable)
}

// Verify validates a bearer token and returns its identity. Its errors
// wrap [ErrInvalidToken] or [ErrIssuerUnavailable] and never contain the
// token.
func (a *Authenticator) Verify(ctx context.Context, token string) (Identity, error) {
	if len(token) > a.opts.MaxTokenBytes {
		return Identity{}, fmt.Errorf("%w: over %d bytes", ErrInvalidToken, a.opts.MaxTokenBytes)
	}
	sum := sha256.Sum256([]byte(token))
	now := a.opts.Now()
	if id, ok := a.cache.get(sum, now.Add(-a.opts.ExpirySkew)); ok {
		return id, nil
	}
	d, err := a.discover(ctx)
	if err != nil {
		return Identity{}, err
	}
	tok, err := d.verifier.Verify(ctx, token)
	if err != nil {
		return Identity{}, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	id, err := a.identity(tok)
	if err != nil {
		return Identity{}, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	a.cache.put(sum, id, now.Add(-a.opts.ExpirySkew))
	return id, nil
}

// identity reads the tenant and the person from a verified token.
func (a *Authenticator) identity(tok *oidc.IDToken) (Identity, error) {
	var claims map[string]any
	if err := tok.Claims(&claims); err != nil {
		return Identity{}, fmt.Errorf("claims: %w", err)
	}
	id := Identity{Tenant: a.cfg.Tenant, Subject: tok.Subject, Expiry: tok.Expiry, Issuer: tok.Issuer, Claims: claims}
	for _, name := range []string{"name", "preferred_username", "email"} {
		if v, ok := claims[name].(string); ok && v != "" {
			id.Name = v
			break
		}
	}
	if a.cfg.TenantClaim == "" {
		return id, nil
	}
	v, present := claims[a.cfg.TenantClaim]
	tenant, isString := v.(string)
	switch {
	case !present:
		return Identity{}, fmt.Errorf("no %s claim", a.cfg.TenantClaim)
	case !isString || !ValidTenant(tenant):
		return Identity{}, fmt.Errorf("the %s claim is not a tenant name (%s)", a.cfg.TenantClaim, tenantPattern)
	}
	id.Tenant = tenant
	return id, nil
}

// discover returns what discovery found, trying it now when it has not
// succeeded yet and the last attempt is older than RediscoverInterval. A
// discovery under way (the one Start began, at the gateway's start) is
// waited for, not refused.
func (a *Authenticator) discover(ctx context.Context) (*discovered, error) {
	if d := a.state.Load(); d != nil {
		return d, nil
	}
	select {
	case a.discovering <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: discovery in progress: %w", ErrIssuerUnavailable, ctx.Err())
	}
	defer func() { <-a.discovering }()
	if d := a.state.Load(); d != nil {
		return d, nil
	}
	if now := a.opts.Now(); !a.lastTry.IsZero() && now.Sub(a.lastTry) < a.opts.RediscoverInterval {
		return nil, a.Ready()
	} else {
		a.lastTry = now
	}
	d, err := a.fetchDiscovery(ctx)
	if err != nil {
		err = fmt.Errorf("%w: %s: %w", ErrIssuerUnavailable, a.cfg.Issuer, err)
		a.lastErr.Store(&err)
		a.opts.Logger.Warn("oidc discovery failed; tokens of this issuer are refused until it answers",
			"issuer", a.cfg.Issuer, "error", err)
		return nil, err
	}
	a.state.Store(d)
	return d, nil
}

// fetchDiscovery reads the issuer's discovery document (go-oidc checks
// that it names the configured issuer) and its key set.
func (a *Authenticator) fetchDiscovery(ctx context.Context) (*discovered, error) {
	ctx = oidc.ClientContext(ctx, a.opts.HTTPClient)
	provider, err := oidc.NewProvider(ctx, a.cfg.Issuer)
	if err != nil {
		return nil, err
	}
	var meta struct {
		JWKSURI string `json:"jwks_uri"`
	}
	if err := provider.Claims(&meta); err != nil || meta.JWKSURI == "" {
		return nil, fmt.Errorf("discovery document without jwks_uri (%v)", err)
	}
	keys := &keySet{url: meta.JWKSURI, client: a.opts.HTTPClient, minRefresh: a.opts.MinRefreshInterval, now: a.opts.Now}
	if err := keys.refresh(ctx, true); err != nil {
		return nil, err
	}
	algs := make([]string, len(allowedAlgorithms))
	for i, alg := range allowedAlgorithms {
		algs[i] = string(alg)
	}
	verifier := oidc.NewVerifier(a.cfg.Issuer, keys, &oidc.Config{
		ClientID:             a.cfg.Audience,
		SupportedSigningAlgs: algs,
		// exp gets ExpirySkew of grace: go-oidc compares it with Now.
		Now: func() time.Time { return a.opts.Now().Add(-a.opts.ExpirySkew) },
	})
	return &discovered{jwksURI: meta.JWKSURI, keys: keys, verifier: verifier}, nil
}
