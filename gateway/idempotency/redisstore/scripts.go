package redisstore

import (
	"embed"

	"github.com/toolgateway/toolgateway/gateway/redisscript"
)

// luaFiles are the store's Lua scripts, one self-contained file each:
// KEYS, ARGV and the record layout are named at the top of the file
// (claim.lua documents the layout). Every script runs through Store.eval
// (eval.go), the one way the store runs a script.
//
//go:embed lua/*.lua lua/include/*.lua
var luaFiles embed.FS

// The scripts, by file.
var (
	claimScript       = redisscript.MustLoad(luaFiles, "claim")
	renewScript       = redisscript.MustLoad(luaFiles, "renew")
	completeScript    = redisscript.MustLoad(luaFiles, "complete")
	markUnknownScript = redisscript.MustLoad(luaFiles, "mark_unknown")
	releaseScript     = redisscript.MustLoad(luaFiles, "release")
	deleteScript      = redisscript.MustLoad(luaFiles, "delete")
	layoutScript      = redisscript.MustLoad(luaFiles, "layout")
	pointScript       = redisscript.MustLoad(luaFiles, "point")
	resolveScript     = redisscript.MustLoad(luaFiles, "resolve")
	approveScript     = redisscript.MustLoad(luaFiles, "approve")
	effectScript      = redisscript.MustLoad(luaFiles, "effect")
	effectKeepScript  = redisscript.MustLoad(luaFiles, "effect_keep")
	effectDropScript  = redisscript.MustLoad(luaFiles, "effect_drop")
	restoreScript     = redisscript.MustLoad(luaFiles, "restore")
	withdrawScript    = redisscript.MustLoad(luaFiles, "withdraw")
	budgetScript      = redisscript.MustLoad(luaFiles, "budget")
	// On Redis Cluster (budgetscluster.go).
	budgetIntentScript    = redisscript.MustLoad(luaFiles, "budget_intent")
	budgetReserveScript   = redisscript.MustLoad(luaFiles, "budget_reserve")
	budgetUnreserveScript = redisscript.MustLoad(luaFiles, "budget_unreserve")
)
