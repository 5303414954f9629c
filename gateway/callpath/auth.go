package callpath

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/toolgateway/toolgateway/gateway/oidcauth"
	"github.com/toolgateway/toolgateway/gateway/principal"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

type tenantKey struct{}

// PrincipalFrom returns the authenticated principal of the request: for
// the tool API a tenant's static token (token:<tenant>) or a provider
// token's person (host-user:<issuer host>:<sub>: the tool API's provider
// tokens are access tokens an MCP host or another client got for the
// person signed in there); for the admin API token:admin. Zero without
// auth.
func PrincipalFrom(ctx context.Context) principal.Principal { return principal.FromContext(ctx) }

// tenantFrom returns the authenticated tenant of the request.
func tenantFrom(ctx context.Context) string {
	if t, ok := ctx.Value(tenantKey{}).(string); ok {
		return t
	}
	return AnonymousTenant
}

// ValidateAuth refuses tenant lists the gateway could not enforce: a
// tenant name is part of every record's scope and of every log line, so it
// must match the tool-name pattern (no ':', '{', '}', spaces or control
// characters); its limits must be enforceable (TenantLimits.checkLimits);
// two tenants must not share a name or a token (the first
// would silently win); and the admin token must differ from every tenant's,
// so no tenant can reach the admin API. A tenant's previous token (a
// rotation) counts as one of its tokens for all of this. admin lists the
// admin token hashes: the current one, then the previous one (nil: none);
// a previous admin token needs a current one, the token that replaces it.
// Errors start with the path of the offending value ("tenants[1].name",
// "admin.token_sha256"), which the config prefixes with its own section.
func ValidateAuth(tenants []Tenant, admin ...*[sha256.Size]byte) error {
	names := make(map[string]bool, len(tenants))
	// owner of each token hash: a tenant's name, or "" for the admin.
	tokens := make(map[[sha256.Size]byte]string, 2*len(tenants))
	adminFields := []string{"admin.token_sha256", "admin.previous_token_sha256"}
	if len(admin) > 1 && admin[0] == nil && admin[1] != nil {
		return errors.New("admin.previous_token_sha256: set only beside admin.token_sha256 (the token that replaces it)")
	}
	for i, h := range admin {
		if h == nil {
			continue
		}
		if _, dup := tokens[*h]; dup {
			return fmt.Errorf("%s: same token as admin.token_sha256; a rotation needs a new token", adminFields[min(i, 1)])
		}
		tokens[*h] = ""
	}
	for i, t := range tenants {
		if !tools.ValidName(t.Name) {
			return fmt.Errorf("tenants[%d].name: %q must match %s", i, t.Name, tools.NamePattern)
		}
		if names[t.Name] {
			return fmt.Errorf("tenants[%d].name: tenant %q listed twice", i, t.Name)
		}
		names[t.Name] = true
		if err := t.Limits.checkLimits(); err != nil {
			return fmt.Errorf("tenants[%d].%w", i, err)
		}
		for j, h := range []*[sha256.Size]byte{&t.TokenSHA256, t.PreviousTokenSHA256} {
			field := []string{"token_sha256", "previous_token_sha256"}[j]
			if h == nil {
				continue
			}
			switch other, dup := tokens[*h]; {
			case dup && other == "":
				return fmt.Errorf("admin.token_sha256: the admin token must differ from tenant %q's token", t.Name)
			case dup && other == t.Name:
				return fmt.Errorf("tenants[%d].previous_token_sha256: same token as its token_sha256; a rotation needs a new token", i)
			case dup:
				return fmt.Errorf("tenants[%d].%s: same token as tenant %q; every tenant needs its own token", i, field, other)
			}
			tokens[*h] = t.Name
		}
	}
	return nil
}

// AdminCaller is the tenant field of the access log line of an admin API
// request: no tenant name can take this form (tenant names match
// tools.NamePattern, which has no parentheses).
const AdminCaller = "(admin)"

// bearerToken returns the request's bearer token and its SHA-256.
func bearerToken(r *http.Request) (string, [sha256.Size]byte, bool) {
	values := r.Header.Values(wire.HeaderAuthorization)
	if len(values) != 1 {
		return "", [sha256.Size]byte{}, false
	}
	scheme, token, ok := strings.Cut(values[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", [sha256.Size]byte{}, false
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return "", [sha256.Size]byte{}, false
	}
	return token, sha256.Sum256([]byte(token)), true
}

// bearerTokenHash returns SHA-256 of the request's bearer token.
func bearerTokenHash(r *http.Request) ([sha256.Size]byte, bool) {
	_, sum, ok := bearerToken(r)
	return sum, ok
}

// authenticate resolves the tenant from the bearer token (when auth is
// configured) before anything else of the tool API runs, so a request
// without a valid token touches nothing. The tenants are the current
// settings' (Reload), loaded once per request. A token that is no static
// tenant's goes to the identity provider, when one is configured.
func (s *Engine) authenticate(next http.Handler) http.Handler {
	if !authOn(s.settings.Load()) {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, sum, ok := bearerToken(r)
		tenant, previous := "", false
		set := s.settings.Load()
		if ok {
			// Compare against every token of every tenant, in constant
			// time each, so the time taken says nothing about which hash
			// was close.
			for _, t := range set.tenants {
				if subtle.ConstantTimeCompare(sum[:], t.TokenSHA256[:]) == 1 && tenant == "" {
					tenant = t.Name
				}
				if t.PreviousTokenSHA256 != nil && subtle.ConstantTimeCompare(sum[:], t.PreviousTokenSHA256[:]) == 1 && tenant == "" {
					tenant, previous = t.Name, true
				}
			}
		}
		var refused error
		who := principal.Token(tenant)
		if tenant == "" && ok && set.oidc != nil {
			tenant, who, refused = s.verifyProviderToken(r, set.oidc, token)
		}
		if tenant == "" {
			s.unauthorizedBecause(w, r, refused)
			return
		}
		setTenant(r.Context(), tenant)
		if previous {
			setPreviousToken(r.Context())
		}
		ctx := context.WithValue(r.Context(), tenantKey{}, tenant)
		next.ServeHTTP(w, r.WithContext(principal.NewContext(ctx, who)))
	})
}

// authenticateAdmin guards the admin API with its own token.
func (s *Engine) authenticateAdmin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The log line names the admin, not a tenant, as the caller.
		setTenant(r.Context(), AdminCaller)
		sum, ok := bearerTokenHash(r)
		match := -1
		if ok {
			for i, h := range s.settings.Load().admin {
				if subtle.ConstantTimeCompare(sum[:], h[:]) == 1 && match < 0 {
					match = i
				}
			}
		}
		if match < 0 {
			s.unauthorized(w, r)
			return
		}
		if match > 0 {
			setPreviousToken(r.Context())
		}
		next.ServeHTTP(w, r.WithContext(principal.NewContext(r.Context(), principal.Admin)))
	})
}

func (s *Engine) unauthorized(w http.ResponseWriter, r *http.Request) {
	s.unauthorizedBecause(w, r, nil)
}

// unauthorizedBecause answers 401. With an identity provider its challenge
// names the RFC 9728 metadata (so MCP hosts find where to sign in) and,
// when a provider token was refused (reason), error="invalid_token".
func (s *Engine) unauthorizedBecause(w http.ResponseWriter, r *http.Request, reason error) {
	p := NewProblem(wire.CodeUnauthorized, "send a valid bearer token")
	setLabel(r.Context(), "", p.label())
	challenge := `Bearer realm="toolgateway"`
	if v := s.settings.Load().oidc; v != nil {
		challenge = oidcauth.Challenge(v.MetadataURL(), reason)
	}
	w.Header().Set("WWW-Authenticate", challenge)
	WriteProblem(w, p)
}
