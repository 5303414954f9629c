package ratelimit

import (
	"testing"

	"github.com/toolgateway/toolgateway/gateway/redisscript"
)

// scriptArgTypes names each script's ARGV struct.
var scriptArgTypes = map[string]redisscript.Args{
	"acquire": acquireArgs{},
	"renew":   renewArgs{},
}

// TestScriptHeaders: each script names its KEYS and ARGV once, at its top,
// in the order its Go struct sends them; every script has a struct.
func TestScriptHeaders(t *testing.T) {
	texts, err := redisscript.Texts(luaFiles)
	if err != nil {
		t.Fatal(err)
	}
	if len(texts) != len(scriptArgTypes) {
		t.Errorf("%d scripts in lua/, %d ARGV structs in scriptArgTypes", len(texts), len(scriptArgTypes))
	}
	for name, text := range texts {
		args, ok := scriptArgTypes[name]
		if !ok {
			t.Errorf("%s.lua has no ARGV struct in scriptArgTypes", name)
			continue
		}
		if err := redisscript.CheckHeader(text, args); err != nil {
			t.Errorf("%s.lua and %T: %v", name, args, err)
		}
	}
}
