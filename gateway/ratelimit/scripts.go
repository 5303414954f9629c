package ratelimit

import (
	_ "embed" // the Lua scripts live in lua/*.lua

	"github.com/redis/go-redis/v9"
)

// The Redis backend's Lua scripts, one self-contained file each: KEYS and
// ARGV are named at the top of the file, and each script's ARGV is a typed
// struct ([redisscript.Args]) whose lua tags are those names, in order
// (TestScriptHeaders holds them equal).
var (
	//go:embed lua/acquire.lua
	acquireLua    string
	acquireScript = redis.NewScript(acquireLua)

	//go:embed lua/renew.lua
	renewLua    string
	renewScript = redis.NewScript(renewLua)
)

// acquireArgs are acquire.lua's ARGV.
type acquireArgs struct {
	Holder  string `lua:"holder"`
	Max     int    `lua:"max"`
	LeaseMS int64  `lua:"lease_ms"`
}

// Argv lists the fields in the script's order.
func (a acquireArgs) Argv() []any { return []any{a.Holder, a.Max, a.LeaseMS} }

// renewArgs are renew.lua's ARGV.
type renewArgs struct {
	Holder  string `lua:"holder"`
	LeaseMS int64  `lua:"lease_ms"`
}

// Argv lists the fields in the script's order.
func (a renewArgs) Argv() []any { return []any{a.Holder, a.LeaseMS} }
