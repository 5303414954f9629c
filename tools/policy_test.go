package tools_test

import (
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/tools"
)

// TestPolicyResolve: configured over the tool's own over the gateway's
// settings over the defaults, field by field; every field set.
func TestPolicyResolve(t *testing.T) {
	cases := []struct {
		name                        string
		configured, own, gatewayDef tools.Policy
		want                        tools.Policy
	}{
		{"nothing set", tools.Policy{}, tools.Policy{}, tools.Policy{},
			tools.Policy{Timeout: 30 * time.Second, ReplayTTL: 24 * time.Hour, LeaseExpiry: tools.LeaseExpiryRerun}},
		{"gateway settings", tools.Policy{}, tools.Policy{}, tools.Policy{Timeout: time.Minute, ReplayTTL: 48 * time.Hour},
			tools.Policy{Timeout: time.Minute, ReplayTTL: 48 * time.Hour, LeaseExpiry: tools.LeaseExpiryRerun}},
		{"the tool's own (an MCP server's entry)", tools.Policy{}, tools.Policy{Timeout: 7 * time.Second, LeaseExpiry: tools.LeaseExpiryUnknown}, tools.Policy{ReplayTTL: 48 * time.Hour},
			tools.Policy{Timeout: 7 * time.Second, ReplayTTL: 48 * time.Hour, LeaseExpiry: tools.LeaseExpiryUnknown}},
		{"configured wins field by field", tools.Policy{ReplayTTL: time.Hour, LeaseExpiry: tools.LeaseExpiryRerun}, tools.Policy{Timeout: 7 * time.Second, ReplayTTL: 2 * time.Hour, LeaseExpiry: tools.LeaseExpiryUnknown}, tools.Policy{Timeout: time.Minute},
			tools.Policy{Timeout: 7 * time.Second, ReplayTTL: time.Hour, LeaseExpiry: tools.LeaseExpiryRerun}},
	}
	for _, c := range cases {
		if got := c.configured.Resolve(c.own, c.gatewayDef); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
	if tools.DefaultPolicy() != (tools.Policy{Timeout: tools.DefaultTimeout, ReplayTTL: tools.DefaultReplayTTL, LeaseExpiry: tools.LeaseExpiryRerun}) {
		t.Errorf("DefaultPolicy %+v", tools.DefaultPolicy())
	}
}
