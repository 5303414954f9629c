-- release: delete the record and free its step, if the caller still owns
-- it (a retry then runs the tool again).
--
-- Returns 1 ({1, entry, bucket...} when the caller is to drop the
-- entry from those buckets: split), or 0 if the lease is lost. Layout: see claim.lua.
local rec = KEYS[1]    -- the record
local charged = KEYS[2] -- its charged budget buckets (budget.lua)
local owner = ARGV[1]  -- owner token (packed)
local fence = ARGV[2]  -- fencing token (decimal)
local step_head = ARGV[3] -- what every step key name starts with: <prefix>S{
local tenant = ARGV[4] -- the record's tenant (its step key's tag hashes it)
local split = ARGV[5] == '1' -- Redis Cluster: the buckets are released by the caller (release_charges)
--#include record_layout
--#include held_step
--#include release_charges

local v = redis.call('GET', rec)
if not v or string.byte(v, 1) ~= 80 then return 0 end -- 80: 'P'
local _, _, _, rfence, rcreated, rindex, rheld, rsession, _, _, p = struct.unpack(HEAD, v)
local rowner = struct.unpack(PROGRESS, v, p)
if rowner ~= owner or string.format('%d', rfence) ~= fence then return 0 end
redis.call('DEL', rec)
local freed = release_charges(charged, rcreated, split)
if rheld == 1 then redis.call('DEL', held_step(rsession, rindex)) end
if #freed > 0 then return {1, rec .. '|' .. string.format('%d', rcreated), unpack(freed)} end
return 1
