-- release: delete the record and free its step, if the caller still owns
-- it (a retry then runs the tool again).
--
-- Returns 1, or 0 if the lease is lost. Layout: see claim.lua.
local rec = KEYS[1]    -- the record
local charged = KEYS[2] -- its charged budget buckets (budget.lua)
local owner = ARGV[1]  -- owner token (packed)
local fence = ARGV[2]  -- fencing token (decimal)
local step_head = ARGV[3] -- what every step key name starts with: <prefix>S{
local tenant = ARGV[4] -- the record's tenant (its step key's tag hashes it)
--#include record_layout
--#include owned_record
--#include held_step
--#include release_charges

local v, _, _, _, rcreated, rheld, rsession, rindex = owned_record()
if not v then return 0 end -- not IN_PROGRESS, or the lease is lost
redis.call('DEL', rec)
release_charges(charged, rcreated)
if rheld == 1 then redis.call('DEL', held_step(rsession, rindex)) end
return 1
