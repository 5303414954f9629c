-- budget_reserve: on Redis Cluster, reserve one charge of a claimed call
-- in its bucket, in the bucket's own slot, after budget_intent.lua named
-- it in the record's charged hash (docs/budgets.md, "Redis Cluster").
-- Idempotent: an entry the record's life already holds is kept as it is
-- (a takeover, or a claim again after a crash between the steps).
--
-- Returns {'reserved'} or {'exceeded', remaining} (nothing written).
local key = KEYS[1]               -- the bucket
local field = ARGV[1]             -- the entry: <record key>|<created µs>
local limit = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local at = tonumber(ARGV[4])      -- µs
local since = tonumber(ARGV[5])   -- µs; -1: a calendar bucket
local retain = tonumber(ARGV[6])  -- ms
local force = ARGV[7] == '1'      -- charge whatever the sum (an approved call)
--#include bucket_charge

if redis.call('HEXISTS', key, field) == 1 then return {'reserved'} end
if not force then
  local sum = bucket_sum(key, since)
  if cost > limit - sum then return {'exceeded', string.format('%d', limit - sum)} end
end
bucket_add(key, field, cost, at, since, retain)
return {'reserved'}
