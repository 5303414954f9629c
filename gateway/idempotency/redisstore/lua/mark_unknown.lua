-- mark_unknown: turn the caller's IN_PROGRESS record UNKNOWN, if the caller
-- still owns it (its lease may have run out: nobody took it over).
--
-- Returns 1, or 0 if the lease is lost. One GET, one SET (the header and
-- the canonical arguments kept, owner and lease dropped: the same value the
-- claim script writes for an expired lease under lease_expiry "unknown"),
-- one PEXPIRE of the step
-- it holds; no clock needed. Layout: see claim.lua.
local rec = KEYS[1]        -- the record
local owner = ARGV[1]      -- owner token (packed)
local fence = ARGV[2]      -- fencing token (decimal)
local replay_ms = ARGV[3]  -- how long the UNKNOWN record is kept
local step_head = ARGV[4]  -- what every step key name starts with: <prefix>S{
local tenant = ARGV[5]     -- the record's tenant (its step key's tag hashes it)
--#include record_layout
--#include held_step

local v = redis.call('GET', rec)
if not v or string.byte(v, 1) ~= 80 then return 0 end -- 80: 'P'
local _, _, _, rfence, _, rindex, rheld, rsession, _, _, p = struct.unpack(HEAD, v)
local rowner, _, _, q = struct.unpack(PROGRESS, v, p)
if rowner ~= owner or string.format('%d', rfence) ~= fence then return 0 end
redis.call('SET', rec, 'U' .. string.sub(v, 2, p - 1) .. string.sub(v, q), 'PX', replay_ms)
if rheld == 1 then redis.call('PEXPIRE', held_step(rsession, rindex), replay_ms) end
return 1
