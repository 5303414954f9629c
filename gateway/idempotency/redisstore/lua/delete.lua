-- delete: remove a record (admin) and free its step. The key name holds
-- the scope, so there is nothing else to check.
--
-- Returns 1 ({1, entry, bucket...} when the caller is to drop the
-- entry from those buckets: split), or 0 if there is no such record. Layout: see claim.lua.
local rec = KEYS[1]  -- the record
local charged = KEYS[2] -- its charged budget buckets (budget.lua)
local kept = KEYS[3]    -- its kept canonical arguments (keptargs.go)
local step_head = ARGV[1] -- what every step key name starts with: <prefix>S{
local tenant = ARGV[2] -- the record's tenant (its step key's tag hashes it)
local split = ARGV[3] == '1' -- Redis Cluster: the buckets are released by the caller (release_charges)
--#include record_layout
--#include held_step
--#include release_charges

local v = redis.call('GET', rec)
if not v then return 0 end
local _, _, _, _, rcreated, rindex, rheld, rsession = struct.unpack(HEAD, v)
redis.call('DEL', rec, kept)
local freed = release_charges(charged, rcreated, split)
if rheld == 1 then redis.call('DEL', held_step(rsession, rindex)) end
if #freed > 0 then return {1, rec .. '|' .. string.format('%d', rcreated), unpack(freed)} end
return 1
