-- renew: extend the lease of a record the caller still owns.
--
-- Returns how long the record (and the step key it holds) now lives,
-- lock ms plus its replay ms (at least 1), or 0 if the lease is lost.
-- Layout: see claim.lua.
local rec = KEYS[1]                -- the record
local owner = ARGV[1]              -- owner token (packed)
local fence = ARGV[2]              -- fencing token (decimal)
local lock_ms = tonumber(ARGV[3])  -- the new lease
local step_head = ARGV[4]          -- what every step key name starts with: <prefix>S{
local tenant = ARGV[5]             -- the record's tenant (its step key's tag hashes it)
--#include record_layout
--#include held_step

local v = redis.call('GET', rec)
if not v or string.byte(v, 1) ~= 80 then return 0 end -- 80: 'P'
local _, _, _, rfence, _, rindex, rheld, rsession, _, _, p = struct.unpack(HEAD, v)
local rowner, _, replay_ms, q = struct.unpack(PROGRESS, v, p)
if rowner ~= owner or string.format('%d', rfence) ~= fence then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local ttl_ms = lock_ms + replay_ms
redis.call('SET', rec, string.sub(v, 1, p - 1) .. struct.pack(PROGRESS, #owner, owner, now + lock_ms * 1000, replay_ms) .. string.sub(v, q), 'PX', ttl_ms)
if rheld == 1 then redis.call('PEXPIRE', held_step(rsession, rindex), ttl_ms) end
return ttl_ms
