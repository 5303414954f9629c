-- release: delete the record and free its step, if the caller still owns
-- it (a retry then runs the tool again).
--
-- KEYS[1] record
-- ARGV    owner, fencing token
--
-- Returns 1, or 0 if the lease is lost. Fields: see claim.lua.
local rec = KEYS[1]
local owner, fence = ARGV[1], ARGV[2]

local f = redis.call('HMGET', rec, 'state', 'owner', 'fence', 'step')
local state, rec_owner, rec_fence, rec_step = f[1], f[2], f[3], f[4]
if state ~= 'IN_PROGRESS' or rec_owner ~= owner or rec_fence ~= fence then return 0 end
redis.call('DEL', rec)
if rec_step and rec_step ~= '' and redis.call('GET', rec_step) == rec then redis.call('DEL', rec_step) end
return 1
