-- budget: reserve a claimed call's budget charges (docs/budgets.md). It
-- runs right after claim.lua, in the claim's pipeline (no round trip of
-- its own), and charges only the record the request now owns: any other
-- outcome of the claim (replay, in progress, UNKNOWN, refusals) finds the
-- record not owned by this request and charges nothing.
--
-- A record's reservation is the field <record key>|<created µs> of each
-- bucket hash. The charged hash maps each bucket the record charged to
-- the record's created µs (its life): a record is charged once in its
-- life, in the window of that charge (a takeover or the same owner's
-- claim again, even in a later window, finds its life there and charges
-- nothing), and a later record under the same key (after a release, a
-- deletion or its expiry) is a new life. The scripts that release a
-- record read it (release_charges).
--
-- Returns {'none'} (nothing to charge), {'reserved'}, or {'exceeded', i,
-- remaining} where i is the 1-based index of the charge over its limit
-- (nothing written then).
local rec = KEYS[1]       -- the record
local charged = KEYS[2]   -- its charged buckets (hash: bucket key name → the record's created µs)
local owner = ARGV[1]     -- owner token of the claim (packed)
local head = ARGV[2]      -- what every bucket key name starts with: <prefix>B{
local charges = ARGV[3]   -- per charge "bucket\31limit\31cost\31at µs\31since µs\31retain ms", joined by \30;
                          -- since -1: a calendar bucket, whose running total (field "=") is its sum
local force = ARGV[4] == '1' -- charge whatever the sums (an approved call)
local HEAD = '>c1Bc0Bc0I8I8Bc0BHc0Hc0Hc0'
local PROGRESS = '>Bc0I8I8'
--#include owned_life
--#include bucket_charge

local life = owned_life(rec, owner)
if not life then return {'none'} end
local field = rec .. '|' .. life
for _, v in ipairs(redis.call('HVALS', charged)) do
  if v == life then return {'reserved'} end -- charged already in this life
end

local list = {}
for c in string.gmatch(charges, '[^\30]+') do
  local bucket, limit, cost, at, since, retain = string.match(c, '^([^\31]*)\31([^\31]*)\31([^\31]*)\31([^\31]*)\31([^\31]*)\31([^\31]*)$')
  list[#list + 1] = {key = head .. bucket .. '}', limit = tonumber(limit), cost = tonumber(cost),
    at = tonumber(at), since = tonumber(since), retain = tonumber(retain)}
end
for i, c in ipairs(list) do
  if not force then
    local sum = bucket_sum(c.key, c.since)
    if c.cost > c.limit - sum then return {'exceeded', string.format('%d', i), string.format('%d', c.limit - sum)} end
  end
end
for _, c in ipairs(list) do
  bucket_add(c.key, field, c.cost, c.at, c.since, c.retain)
  redis.call('HSET', charged, c.key, life)
  if redis.call('PTTL', charged) < c.retain then redis.call('PEXPIRE', charged, c.retain) end
end
return {'reserved'}
