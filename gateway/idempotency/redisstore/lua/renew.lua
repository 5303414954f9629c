-- renew: extend the lease of a record the caller still owns.
--
-- KEYS[1] record
-- ARGV    owner, fencing token, lock ms
--
-- Returns 1, or 0 if the lease is lost. The record (and the step key it
-- holds) then lives lock ms plus its replay ms. Fields: see claim.lua.
local rec = KEYS[1]
local owner, fence, lock_ms = ARGV[1], ARGV[2], tonumber(ARGV[3])

local function int(n) return string.format('%d', n) end
local f = redis.call('HMGET', rec, 'state', 'owner', 'fence', 'replay', 'step')
local state, rec_owner, rec_fence, replay_ms, rec_step = f[1], f[2], f[3], tonumber(f[4]), f[5]
if state ~= 'IN_PROGRESS' or rec_owner ~= owner or rec_fence ~= fence then return 0 end
local step = nil
if rec_step and rec_step ~= '' and redis.call('GET', rec_step) == rec then step = rec_step end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

local lease_end = now + lock_ms * 1000
local ttl_ms = int(lock_ms + replay_ms)
redis.call('HSET', rec, 'lease', int(lease_end), 'expires', int(lease_end + replay_ms * 1000))
redis.call('PEXPIRE', rec, ttl_ms)
if step then redis.call('PEXPIRE', step, ttl_ms) end
return 1
