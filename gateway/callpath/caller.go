package callpath

import (
	"context"
	"net/url"

	"github.com/toolgateway/toolgateway/gateway/oidcauth"
)

// personKey holds the identity provider's verified token of the request
// (an oidcauth.Identity), set by authenticate for a provider token only.
type personKey struct{}

// HostUser returns the principal of the person an MCP host signed in
// through the identity provider, "host-user:<issuer host>:<sub>", and
// true; "" and false when the request's token names no person (a static
// tenant token, shared by whoever holds it, or no auth at all).
//
// It reads only what authenticate verified, never a client-supplied
// value. (The principal package of contract section 19 replaces this
// one function when it lands.)
func HostUser(ctx context.Context) (string, bool) {
	id, ok := ctx.Value(personKey{}).(oidcauth.Identity)
	if !ok || id.Subject == "" {
		return "", false
	}
	host := id.Issuer
	if u, err := url.Parse(id.Issuer); err == nil && u.Host != "" {
		host = u.Host
	}
	return "host-user:" + host + ":" + id.Subject, true
}
