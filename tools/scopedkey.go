package tools

import "github.com/toolgateway/toolgateway/keyderive"

// ScopedKey is the idempotency key an upstream (HTTP or MCP) receives for a
// call: lowercase_hex(SHA-256(tenant ":" tool ":" key)), where tool is the
// gateway's name of the tool (an MCP server's prefix included) and key the
// client's (unquoted) Idempotency-Key. It is scoped like the gateway's
// record, so two tenants that send the same key never share an upstream's
// deduplication, and an upstream that deduplicates on this value alone is
// safe. The rule lives in keyderive.ScopedKey (the gateway's call path
// calls it directly); this is the name the tools' side calls.
func ScopedKey(tenant, tool, key string) string {
	return keyderive.ScopedKey(tenant, tool, key)
}
