package gatewaycmd

import (
	"context"
	"fmt"
	"strings"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/oidcauth"
)

// verifier is a as the gateway's TokenVerifier (nil stays an untyped nil,
// so the gateway sees "no identity provider").
func verifier(a *oidcauth.Authenticator) callpath.TokenVerifier {
	if a == nil {
		return nil
	}
	return a
}

// startOIDC begins the identity provider's discovery in the background, so
// the first token need not wait for it; an issuer that does not answer
// does not stop start-up.
func startOIDC(ctx context.Context, v callpath.TokenVerifier) {
	if a, ok := v.(*oidcauth.Authenticator); ok {
		a.Start(ctx)
	}
}

// keepRunningOIDC returns the running verifier when a reload configures
// the same provider, so its discovered keys and verified tokens are kept;
// a changed provider is the new one.
func keepRunningOIDC(running, next callpath.TokenVerifier) callpath.TokenVerifier {
	cur, ok1 := running.(*oidcauth.Authenticator)
	nxt, ok2 := next.(*oidcauth.Authenticator)
	if ok1 && ok2 && sameOIDC(cur.Config(), nxt.Config()) {
		return running
	}
	return next
}

func sameOIDC(a, b oidcauth.Config) bool {
	return a.Issuer == b.Issuer && a.Audience == b.Audience && a.TenantClaim == b.TenantClaim &&
		a.Tenant == b.Tenant && a.Resource == b.Resource && strings.Join(a.Scopes, " ") == strings.Join(b.Scopes, " ")
}

// dialOIDC fetches the issuer's discovery document and key set, for
// `gateway check -dial`.
func dialOIDC(ctx context.Context, v callpath.TokenVerifier) []DialResult {
	a, ok := v.(*oidcauth.Authenticator)
	if !ok {
		return nil
	}
	res := DialResult{Target: "oidc:" + a.Config().Issuer}
	r, err := a.Dial(ctx)
	if err != nil {
		res.Detail = err.Error()
		return []DialResult{res}
	}
	res.OK = true
	res.Detail = fmt.Sprintf("discovery and key set (%s): keys %s", r.JWKSURI, strings.Join(r.Keys, ", "))
	return []DialResult{res}
}
