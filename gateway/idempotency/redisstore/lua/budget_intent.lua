-- budget_intent: on Redis Cluster, the first step of a claimed call's
-- budget reservation (docs/budgets.md, "Redis Cluster"). It runs right
-- after claim.lua, in the claim's pipeline and the record's slot, and
-- writes into the record's charged hash which buckets the record is to
-- charge — before any bucket is touched, so every entry a bucket ever
-- holds is named by its record first. The buckets live in slots of their
-- own: the caller then reserves in each (budget_reserve.lua), and runs
-- the tool only once all are reserved.
--
-- A record is charged once in its life: a takeover or the same owner's
-- claim again (even in a later window) gets the charges its life
-- intended first, to reserve again (a reservation is idempotent: its
-- entry is named by the record's life), never new ones.
--
-- Returns {'none'} (the request does not own the record: nothing to
-- charge), or {'life', <created µs>, charge...}: each charge as "bucket
-- key\31limit\31cost\31at µs\31since µs\31retain ms".
local rec = KEYS[1]       -- the record
local charged = KEYS[2]   -- its charged buckets (hash: bucket key name → "<created µs>\31<charge>")
local owner = ARGV[1]     -- owner token of the claim (packed)
local head = ARGV[2]      -- what every bucket key name starts with: <prefix>B{
local charges = ARGV[3]   -- per charge "bucket\31limit\31cost\31at µs\31since µs\31retain ms", joined by \30
local HEAD = '>c1Bc0Bc0I8I8Bc0BHc0Hc0Hc0'
local PROGRESS = '>Bc0I8I8'
--#include owned_life

local life = owned_life(rec, owner)
if not life then return {'none'} end
local out = {'life', life}
local all = redis.call('HGETALL', charged)
for j = 1, #all, 2 do
  local elife, spec = string.match(all[j + 1], '^(%d+)\31(.*)$')
  if elife == life then out[#out + 1] = all[j] .. '\31' .. spec end
end
if #out > 2 then return out end -- intended in this life already

local retain = 0
for c in string.gmatch(charges, '[^\30]+') do
  local bucket, spec, r = string.match(c, '^([^\31]*)\31(.*\31([^\31]*))$')
  redis.call('HSET', charged, head .. bucket .. '}', life .. '\31' .. spec)
  out[#out + 1] = head .. bucket .. '}\31' .. spec
  retain = math.max(retain, tonumber(r))
end
if redis.call('PTTL', charged) < retain then redis.call('PEXPIRE', charged, retain) end
return out
