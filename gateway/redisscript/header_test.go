package redisscript

import (
	"strings"
	"testing"
)

const pairScript = `-- pair: a test script.
local slots = KEYS[1]              -- a key
local holder = ARGV[1]             -- a name
local lease_ms = tonumber(ARGV[2]) -- a duration
return redis.call('PSETEX', slots, lease_ms, holder)
`

type pairArgs struct {
	Holder  string `lua:"holder"`
	LeaseMS int64  `lua:"lease_ms"`
}

func (a pairArgs) Argv() []any { return []any{a.Holder, a.LeaseMS} }

// swappedArgs sends its fields in the wrong order.
type swappedArgs struct {
	Holder  string `lua:"holder"`
	LeaseMS int64  `lua:"lease_ms"`
}

func (a swappedArgs) Argv() []any { return []any{a.LeaseMS, a.Holder} }

// renamedArgs tags a field with a name the script does not use.
type renamedArgs struct {
	Holder  string `lua:"owner"`
	LeaseMS int64  `lua:"lease_ms"`
}

func (a renamedArgs) Argv() []any { return []any{a.Holder, a.LeaseMS} }

type noArgs struct{}

func (noArgs) Argv() []any { return nil }

// TestCheckHeader: a script and struct that agree pass; each way of
// disagreeing is reported, naming what is wrong.
func TestCheckHeader(t *testing.T) {
	if err := CheckHeader(pairScript, pairArgs{}); err != nil {
		t.Errorf("matching script and struct: %v", err)
	}
	if err := CheckHeader("local k = KEYS[1]\nreturn redis.call('DEL', k)\n", noArgs{}); err != nil {
		t.Errorf("script without ARGV, empty struct: %v", err)
	}
	cases := []struct {
		name   string
		script string
		args   Args
		want   string
	}{
		{"argv order", pairScript, swappedArgs{}, "want field 1"},
		{"tag names", pairScript, renamedArgs{}, "lua tags are [owner lease_ms]"},
		{"argv outside the header", pairScript + "return ARGV[1]\n", pairArgs{}, "reads ARGV 3 times, 2 of them in its header"},
		{"keys outside the header", pairScript + "return KEYS[2]\n", pairArgs{}, "reads KEYS 2 times, 1 of them in its header"},
		{"header out of order", strings.Replace(pairScript, "ARGV[2]", "ARGV[3]", 1), pairArgs{}, "lease_ms is ARGV[3], want ARGV[2]"},
		{"no keys", "local a = ARGV[1]\nreturn a\n", struct{ noArgs }{}, "reads KEYS 0 times"},
	}
	for _, c := range cases {
		err := CheckHeader(c.script, c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: CheckHeader = %v, want an error containing %q", c.name, err, c.want)
		}
	}
}
