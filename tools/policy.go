package tools

import "time"

// The defaults of a [Policy]: what a field nobody set (neither the config,
// nor the tool, nor the gateway's options) comes to.
const (
	// DefaultTimeout bounds one execution.
	DefaultTimeout = 30 * time.Second
	// DefaultReplayTTL is how long an outcome is replayed.
	DefaultReplayTTL = 24 * time.Hour
)

// DefaultPolicy is the policy of a tool nothing configures: [DefaultTimeout],
// [DefaultReplayTTL] and [LeaseExpiryRerun].
func DefaultPolicy() Policy {
	return Policy{Timeout: DefaultTimeout, ReplayTTL: DefaultReplayTTL, LeaseExpiry: LeaseExpiryRerun}
}

// Resolve is the effective policy of a tool, the one rule for it that the
// gateway runs with and `gateway check` reports: p (configured under tools:
// for the tool's name) wins field by field over own (the policy the tool
// brings in its [Spec], e.g. an MCP server's mcp_servers: entry), which
// wins over gatewayDefaults (the gateway's own timeout and replay_ttl
// settings), which win over [DefaultPolicy]. Every field of the result is
// set.
func (p Policy) Resolve(own, gatewayDefaults Policy) Policy {
	return p.Or(own).Or(gatewayDefaults).Or(DefaultPolicy())
}
