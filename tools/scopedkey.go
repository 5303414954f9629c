package tools

import (
	"crypto/sha256"
	"encoding/hex"
)

// ScopedKey is the idempotency key an upstream (HTTP or MCP) receives for a
// call: lowercase_hex(SHA-256(tenant ":" tool ":" key)), where tool is the
// gateway's name of the tool (an MCP server's prefix included) and key the
// client's (unquoted) Idempotency-Key. It is scoped like the gateway's
// record, so two tenants that send the same key never share an upstream's
// deduplication, and an upstream that deduplicates on this value alone is
// safe. This is the one implementation; everything that forwards a key
// calls it.
func ScopedKey(tenant, tool, key string) string {
	sum := sha256.Sum256([]byte(tenant + ":" + tool + ":" + key))
	return hex.EncodeToString(sum[:])
}
