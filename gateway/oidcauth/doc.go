// Package oidcauth makes the gateway an OAuth 2.1 resource server for the
// access tokens of the operator's OpenID provider, beside the static tenant
// tokens: [Authenticator.Verify] validates a JWT access token (signature by
// the issuer's JWKS, iss, aud, exp/nbf, an allow-list of algorithms) and
// names its tenant; [Authenticator.MetadataHandler] serves the RFC 9728
// protected resource metadata through which MCP hosts (ChatGPT and
// Claude.ai connectors, VS Code, Claude Code) find where to sign in; and
// [Challenge] writes the WWW-Authenticate value of a 401 that points at it.
//
// The gateway is a resource server only: it never issues tokens. Claims are
// checked by github.com/coreos/go-oidc; signatures by go-jose against the
// issuer's key set, which this package fetches, caches and refreshes on an
// unknown key id at most once per [Options.MinRefreshInterval], so tokens
// with made-up key ids cannot make the gateway hammer the issuer.
//
// Discovery is lazy: an issuer that does not answer when the gateway starts
// does not stop it; calls with JWTs then fail with [ErrIssuerUnavailable]
// (the REST answer is 503 with Retry-After) until discovery succeeds, and
// [Authenticator.Ready] says why.
package oidcauth
