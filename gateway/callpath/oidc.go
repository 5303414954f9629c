package callpath

import (
	"context"
	"errors"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/toolgateway/toolgateway/gateway/oidcauth"
	"github.com/toolgateway/toolgateway/gateway/principal"
	"github.com/toolgateway/toolgateway/wire"
)

// TokenVerifier checks the access tokens of the operator's identity
// provider, beside the static tenant tokens: [oidcauth.Authenticator] is
// the one the gateway ships. The call path sees only the tenant it names.
type TokenVerifier interface {
	// Verify returns the identity of a valid token; its errors wrap
	// oidcauth.ErrInvalidToken or oidcauth.ErrIssuerUnavailable and never
	// contain the token.
	Verify(ctx context.Context, token string) (oidcauth.Identity, error)
	// MetadataURL is where the RFC 9728 metadata of the gateway is.
	MetadataURL() string
	// MetadataHandler serves that metadata.
	MetadataHandler() http.Handler
	// Ready is nil once the provider's keys were had.
	Ready() error
}

var _ TokenVerifier = (*oidcauth.Authenticator)(nil)

// mountProtectedResourceMetadata serves RFC 9728 metadata at the
// well-known path and its /mcp-suffixed form (hosts ask for the latter
// for the resource https://…/mcp), without auth: it is how an MCP host
// learns where to sign in. Without OIDC both answer 404.
func (s *Engine) mountProtectedResourceMetadata(r chi.Router) {
	serve := func(w http.ResponseWriter, req *http.Request) {
		v := s.settings.Load().oidc
		if v == nil {
			WriteProblem(w, NewProblem(wire.CodeNotFound, "no identity provider is configured"))
			return
		}
		v.MetadataHandler().ServeHTTP(w, req)
	}
	r.Get(oidcauth.WellKnownPath, serve)
	r.Get(oidcauth.WellKnownPath+"/*", serve)
}

// verifyProviderToken resolves the tenant of a bearer token that is no
// static tenant's, through the identity provider, and the person it
// names (host-user:, see PrincipalFrom). The reason of a refusal
// is logged (never the token) and returned for the challenge.
func (s *Engine) verifyProviderToken(r *http.Request, v TokenVerifier, token string) (string, principal.Principal, error) {
	id, err := v.Verify(r.Context(), token)
	if err != nil {
		level := "token of the identity provider refused"
		if errors.Is(err, oidcauth.ErrIssuerUnavailable) {
			level = "token of the identity provider not checked: the provider is unavailable"
		}
		s.log.InfoContext(r.Context(), level, "reason", err.Error())
		return "", principal.Principal{}, err
	}
	who, err := principal.HostUser(id.Issuer, id.Subject, id.Name, id.Claims)
	if err != nil {
		s.log.InfoContext(r.Context(), "token of the identity provider refused", "reason", err.Error())
		return "", principal.Principal{}, err
	}
	return id.Tenant, who, nil
}
