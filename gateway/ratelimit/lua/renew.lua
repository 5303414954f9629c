-- renew: extend holder's slot to lease ms from now, or take it again (the
-- tool is still running; its slot was lost, say, to a restarted Redis).
-- Layout: see acquire.lua. Returns 1.
local slots = KEYS[1]              -- the tenant's sorted set of slots
local holder = ARGV[1]             -- the execution holding the slot
local lease_ms = tonumber(ARGV[2]) -- the new lease

-- TIME then writes: see acquire.lua.
redis.replicate_commands()
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

redis.call('ZADD', slots, now + lease_ms, holder)
if redis.call('PTTL', slots) < lease_ms then redis.call('PEXPIRE', slots, lease_ms) end
return 1
