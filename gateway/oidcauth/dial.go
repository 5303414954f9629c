package oidcauth

import (
	"context"
	"fmt"
)

// DialReport is what [Authenticator.Dial] found at the issuer.
type DialReport struct {
	Issuer  string
	JWKSURI string
	// Keys are the key ids and algorithms of the issuer's key set.
	Keys []string
}

// Dial fetches the issuer's discovery document and key set now, for
// `gateway check -dial`, and reports them.
func (a *Authenticator) Dial(ctx context.Context) (DialReport, error) {
	d, err := a.fetchDiscovery(ctx)
	if err != nil {
		return DialReport{}, fmt.Errorf("oidc issuer %s: %w", a.cfg.Issuer, err)
	}
	r := DialReport{Issuer: a.cfg.Issuer, JWKSURI: d.jwksURI}
	for _, k := range d.keys.keys.Load().Keys {
		r.Keys = append(r.Keys, fmt.Sprintf("%s (%s)", k.KeyID, k.Algorithm))
	}
	return r, nil
}
