package oidcauth

import (
	"crypto/sha256"
	"sync"
	"time"
)

// tokenCache remembers the identities of tokens that verified, keyed by the
// token's SHA-256, until their exp: a signature check costs tens of
// microseconds, and an agent sends the same token with every call. A token
// the issuer revokes or whose key it retires stays accepted until its exp,
// as with any self-contained access token.
type tokenCache struct {
	limit int

	mu      sync.RWMutex
	entries map[[sha256.Size]byte]Identity
}

func newTokenCache(limit int) *tokenCache {
	return &tokenCache{limit: limit, entries: make(map[[sha256.Size]byte]Identity)}
}

// get returns the identity of a cached token not expired at now.
func (c *tokenCache) get(sum [sha256.Size]byte, now time.Time) (Identity, bool) {
	c.mu.RLock()
	id, ok := c.entries[sum]
	c.mu.RUnlock()
	if !ok || !id.Expiry.After(now) {
		return Identity{}, false
	}
	return id, true
}

// put caches id; at the limit it first drops the expired entries, and all
// of them when none had expired, so memory stays bounded.
func (c *tokenCache) put(sum [sha256.Size]byte, id Identity, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= c.limit {
		for k, e := range c.entries {
			if !e.Expiry.After(now) {
				delete(c.entries, k)
			}
		}
		if len(c.entries) >= c.limit {
			clear(c.entries)
		}
	}
	c.entries[sum] = id
}
