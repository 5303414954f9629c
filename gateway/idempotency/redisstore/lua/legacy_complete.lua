-- The previous layout's legacy_complete script, kept verbatim for compat_test.go, which
-- writes records exactly as a gateway before the upgrade did. Not used by
-- the store; remove with the compat path (Options.NoLegacyLayout).
--
-- complete: store the tool's response as COMPLETED, if the caller still
-- owns the record.
--
-- KEYS[1] record
-- ARGV    owner, fencing token, replay ms, status, content type, body
--
-- Returns 1, or 0 if the lease is lost. Fields: see claim.lua.
local rec = KEYS[1]
local owner, fence, replay_ms = ARGV[1], ARGV[2], ARGV[3]
local status, ctype, body = ARGV[4], ARGV[5], ARGV[6]

local function int(n) return string.format('%d', n) end
local f = redis.call('HMGET', rec, 'state', 'owner', 'fence', 'step')
local state, rec_owner, rec_fence, rec_step = f[1], f[2], f[3], f[4]
if state ~= 'IN_PROGRESS' or rec_owner ~= owner or rec_fence ~= fence then return 0 end
local step = nil
if rec_step and rec_step ~= '' and redis.call('GET', rec_step) == rec then step = rec_step end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

redis.call('HSET', rec, 'state', 'COMPLETED', 'status', status, 'ctype', ctype, 'body', body,
  'expires', int(now + tonumber(replay_ms) * 1000))
redis.call('HDEL', rec, 'owner', 'lease')
redis.call('PEXPIRE', rec, replay_ms)
if step then redis.call('PEXPIRE', step, replay_ms) end
return 1
