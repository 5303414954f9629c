package ratelimit

import (
	"embed"

	"github.com/toolgateway/toolgateway/gateway/redisscript"
)

// luaFiles are the Redis backend's Lua scripts, one self-contained file
// each: KEYS and ARGV are named at the top of the file, and each script's
// ARGV is a typed struct ([redisscript.Args]) whose lua tags are those
// names, in order (TestScriptHeaders holds them equal).
//
//go:embed lua/*.lua
var luaFiles embed.FS

// The scripts, by file.
var (
	acquireScript = redisscript.MustLoad(luaFiles, "acquire")
	renewScript   = redisscript.MustLoad(luaFiles, "renew")
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
