package oidcauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// allowedAlgorithms are the signature algorithms a token may use: the
// asymmetric ones. "none" and every HMAC algorithm are refused before a
// key is even looked up, so a token "signed" with the issuer's public key
// as an HMAC secret is malformed here.
var allowedAlgorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512,
	jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512,
	jose.EdDSA,
}

// maxJWKSBytes bounds an issuer's key set document.
const maxJWKSBytes = 1 << 20

// errUnknownKey is a token whose key id the issuer's key set does not
// have, even after a refresh.
var errUnknownKey = errors.New("no key of the issuer's key set has the token's key id")

// keySet is the issuer's JSON Web Key Set, fetched from its jwks_uri and
// cached. It implements go-oidc's KeySet. A token with a key id the cache
// lacks triggers a refresh, at most once per minRefresh: the issuer rotates
// keys rarely, and a flood of tokens with made-up key ids must not become
// a flood of fetches.
type keySet struct {
	url        string
	client     *http.Client
	minRefresh time.Duration
	now        func() time.Time

	keys atomic.Pointer[jose.JSONWebKeySet]

	mu        sync.Mutex // serialises refreshes
	lastFetch time.Time
}

// VerifySignature returns the payload of jwt when one of the issuer's keys
// with its key id verifies it.
func (k *keySet) VerifySignature(ctx context.Context, jwt string) ([]byte, error) {
	jws, err := jose.ParseSignedCompact(jwt, allowedAlgorithms)
	if err != nil {
		return nil, fmt.Errorf("malformed token: %w", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("malformed token: want exactly one signature")
	}
	kid := jws.Signatures[0].Header.KeyID
	candidates := k.lookup(kid)
	if len(candidates) == 0 {
		// The keys cached at discovery still serve every other token: a
		// refresh that fails makes only this token unverifiable (401).
		if err := k.refresh(ctx, false); err != nil {
			return nil, fmt.Errorf("key id %q not cached, and %w", kid, err)
		}
		if candidates = k.lookup(kid); len(candidates) == 0 {
			return nil, fmt.Errorf("key id %q: %w", kid, errUnknownKey)
		}
	}
	for _, key := range candidates {
		if payload, err := jws.Verify(key); err == nil {
			return payload, nil
		}
	}
	return nil, errors.New("signature does not verify with the issuer's key")
}

// lookup returns the cached keys for kid (every signing key when the token
// names none).
func (k *keySet) lookup(kid string) []jose.JSONWebKey {
	set := k.keys.Load()
	if set == nil {
		return nil
	}
	if kid != "" {
		return set.Key(kid)
	}
	var out []jose.JSONWebKey
	for _, key := range set.Keys {
		if key.Use == "" || key.Use == "sig" {
			out = append(out, key)
		}
	}
	return out
}

// refresh fetches the key set again, unless the last fetch is more recent
// than minRefresh (force skips that limit: the first fetch and check
// -dial). A refresh that fails keeps the cached keys.
func (k *keySet) refresh(ctx context.Context, force bool) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !force && !k.lastFetch.IsZero() && k.now().Sub(k.lastFetch) < k.minRefresh {
		return nil // rate-limited: the caller finds the key unknown
	}
	k.lastFetch = k.now()
	set, err := k.fetch(ctx)
	if err != nil {
		return fmt.Errorf("key set: %w", err)
	}
	k.keys.Store(set)
	return nil
}

func (k *keySet) fetch(ctx context.Context) (*jose.JSONWebKeySet, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: status %d", k.url, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", k.url, err)
	}
	if len(body) > maxJWKSBytes {
		return nil, fmt.Errorf("GET %s: over %d bytes", k.url, maxJWKSBytes)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("GET %s: not a JSON Web Key Set: %w", k.url, err)
	}
	if len(set.Keys) == 0 {
		return nil, fmt.Errorf("GET %s: the key set has no keys", k.url)
	}
	return &set, nil
}
