package benchtool

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Issuer is a minimal OpenID provider on a loopback listener, for the
// "everything" profile's provider tokens: it publishes a discovery
// document and its key set, and signs JWT access tokens (ES256) that the
// gateway verifies as it verifies any provider's (oidcauth: discovery,
// the key set fetched once and cached, signature and claims checked on a
// token's first call). It signs its own tokens rather than running a
// token endpoint so a long quiet run never meets an expired token.
type Issuer struct {
	// URL is the issuer (no trailing slash), as auth.oidc.issuer names it.
	URL    string
	signer jose.Signer
	srv    *http.Server
}

// IssuerTenantClaim is the claim the Issuer's tokens carry the tenant in.
const IssuerTenantClaim = "org_id"

// StartIssuer serves a new issuer with a new key on a loopback listener
// until Close.
func StartIssuer() (*Issuer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("benchtool: issuer key: %w", err)
	}
	kid := randomHex(8)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return nil, fmt.Errorf("benchtool: issuer signer: %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("benchtool: issuer listen: %w", err)
	}
	iss := &Issuer{URL: "http://" + l.Addr().String(), signer: signer}
	keys := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: kid, Algorithm: string(jose.ES256), Use: "sig"}}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]any{
			"issuer": iss.URL, "jwks_uri": iss.URL + "/jwks",
			"id_token_signing_alg_values_supported": []string{string(jose.ES256)},
		})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, keys) })
	iss.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = iss.srv.Serve(l) }()
	return iss, nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// Token signs an access token for audience, valid for ttl, whose tenant
// claim is tenant and whose subject is subject.
func (i *Issuer) Token(audience, tenant, subject string, ttl time.Duration) (string, error) {
	now := time.Now()
	claims := jwt.Claims{Issuer: i.URL, Subject: subject, Audience: jwt.Audience{audience},
		IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now.Add(-time.Minute)), Expiry: jwt.NewNumericDate(now.Add(ttl))}
	tok, err := jwt.Signed(i.signer).Claims(claims).Claims(map[string]any{IssuerTenantClaim: tenant, "name": subject}).Serialize()
	if err != nil {
		return "", fmt.Errorf("benchtool: sign token: %w", err)
	}
	return tok, nil
}

// Close stops serving.
func (i *Issuer) Close() error { return i.srv.Close() }
