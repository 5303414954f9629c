package oidcauth_test

import (
	"crypto/sha256"
	"crypto/subtle"
	"testing"

	"github.com/toolgateway/toolgateway/gateway/oidcauth"
	"github.com/toolgateway/toolgateway/internal/oidctest"
)

// BenchmarkVerify measures a JWT of the provider against a static token:
// "cached" is an agent's token after its first call (the verified-token
// cache), "first" a token the gateway has not seen (signature and claims
// checked; the key set cached), "static" what a static tenant token costs
// (SHA-256 and a constant-time compare).
func BenchmarkVerify(b *testing.B) {
	p := oidctest.Start(b, audience)
	token := p.Token(b, "org:acme")
	b.Run("static", func(b *testing.B) {
		want := sha256.Sum256([]byte(token))
		for b.Loop() {
			sum := sha256.Sum256([]byte(token))
			if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
				b.Fatal("mismatch")
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		a := newAuthB(b, p, oidcauth.Options{})
		for b.Loop() {
			if _, err := a.Verify(b.Context(), token); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("first", func(b *testing.B) {
		a := newAuthB(b, p, oidcauth.Options{CacheEntries: 1})
		other := p.Token(b, "org:globex")
		i := 0
		for b.Loop() {
			// Alternating two tokens in a one-entry cache: every call
			// verifies the signature.
			tok := token
			if i++; i%2 == 0 {
				tok = other
			}
			if _, err := a.Verify(b.Context(), tok); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func newAuthB(b *testing.B, p *oidctest.Provider, opts oidcauth.Options) *oidcauth.Authenticator {
	a, err := oidcauth.New(oidcauth.Config{Issuer: p.Issuer, Audience: audience, TenantClaim: oidctest.TenantClaim}, opts)
	if err != nil {
		b.Fatal(err)
	}
	return a
}
