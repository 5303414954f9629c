package ratelimit

import (
	"testing"

	"github.com/toolgateway/toolgateway/gateway/redisscript"
)

// TestScriptHeaders: each script names its KEYS and ARGV once, at its top,
// in the order its Go struct sends them.
func TestScriptHeaders(t *testing.T) {
	scripts := map[string]struct {
		text string
		args redisscript.Args
	}{
		"acquire": {acquireLua, acquireArgs{}},
		"renew":   {renewLua, renewArgs{}},
	}
	for name, s := range scripts {
		if err := redisscript.CheckHeader(s.text, s.args); err != nil {
			t.Errorf("%s.lua and %T: %v", name, s.args, err)
		}
	}
}
