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
--#include record_layout

local v = redis.call('GET', rec)
if not v or string.byte(v, 1) ~= 80 then return {'none'} end -- 80: 'P'
local _, _, _, _, rcreated, _, _, _, p = struct.unpack(HEAD, v)
if struct.unpack(PROGRESS, v, p) ~= owner then return {'none'} end
local life = string.format('%d', rcreated)
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
    local sum = 0
    if c.since < 0 then
      sum = tonumber(redis.call('HGET', c.key, '=') or '0')
    else
      local all = redis.call('HGETALL', c.key)
      for j = 1, #all, 2 do
        local ecost, eat = string.match(all[j + 1], '^(%d+):(%d+)$')
        if all[j] ~= '=' and tonumber(eat) >= c.since then sum = sum + tonumber(ecost) end
      end
    end
    if c.cost > c.limit - sum then return {'exceeded', string.format('%d', i), string.format('%d', c.limit - sum)} end
  end
end
for _, c in ipairs(list) do
  do
    if c.since >= 0 then
      -- A rolling bucket drops entries of windows long past as it is
      -- written (a calendar bucket expires whole).
      local all = redis.call('HGETALL', c.key)
      for j = 1, #all, 2 do
        local eat = tonumber(string.match(all[j + 1], ':(%d+)$'))
        if eat and eat < c.since - c.retain * 1000 then redis.call('HDEL', c.key, all[j]) end
      end
    end
    redis.call('HSET', c.key, field, string.format('%d:%d', c.cost, c.at))
    redis.call('HINCRBY', c.key, '=', c.cost)
    if redis.call('PTTL', c.key) < c.retain then redis.call('PEXPIRE', c.key, c.retain) end
    redis.call('HSET', charged, c.key, life)
    if redis.call('PTTL', charged) < c.retain then redis.call('PEXPIRE', charged, c.retain) end
  end
end
return {'reserved'}
