package redisstore

import (
	_ "embed" // the Lua scripts live in lua/*.lua

	"github.com/redis/go-redis/v9"
)

// The Lua scripts, one self-contained file each: KEYS, ARGV and the record
// layout are named at the top of the file (claim.lua documents the
// layout). Every script runs through Store.eval (eval.go), the one way the
// store runs a script.
var (
	//go:embed lua/claim.lua
	claimLua    string
	claimScript = redis.NewScript(claimLua)

	//go:embed lua/renew.lua
	renewLua    string
	renewScript = redis.NewScript(renewLua)

	//go:embed lua/complete.lua
	completeLua    string
	completeScript = redis.NewScript(completeLua)

	//go:embed lua/mark_unknown.lua
	markUnknownLua    string
	markUnknownScript = redis.NewScript(markUnknownLua)

	//go:embed lua/release.lua
	releaseLua    string
	releaseScript = redis.NewScript(releaseLua)

	//go:embed lua/delete.lua
	deleteLua    string
	deleteScript = redis.NewScript(deleteLua)

	//go:embed lua/layout.lua
	layoutLua    string
	layoutScript = redis.NewScript(layoutLua)

	//go:embed lua/point.lua
	pointLua    string
	pointScript = redis.NewScript(pointLua)

	//go:embed lua/resolve.lua
	resolveLua    string
	resolveScript = redis.NewScript(resolveLua)

	//go:embed lua/approve.lua
	approveLua    string
	approveScript = redis.NewScript(approveLua)
)
