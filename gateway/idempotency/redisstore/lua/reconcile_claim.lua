-- reconcile_claim: take the reconcile lease of an UNKNOWN record, or of an
-- IN_PROGRESS one whose lease ran out (abandoned: it turns UNKNOWN, as
-- claim.lua turns it under lease_expiry "unknown"), for one reconciler.
--
-- The reconciliation lives in a key of its own beside the record (same
-- hash tag, so same slot), JSON: {"f": the record's fencing token
-- (decimal string: the state belongs to that claim only), "o": owner,
-- "l": lease end (ms), "n": attempts, "a": [{"t": ms, "o": outcome,
-- "d": detail}], "rb": "reconcile" once completed}. It expires with the
-- record; a state whose "f" is not the record's is stale and starts over.
--
-- Returns {"ok", record value, state} | {"held"} | {"not_resolvable"}
--       | {"not_found"}. Layout: see claim.lua.
local rec = KEYS[1]       -- the record
local rq = KEYS[2]        -- its reconciliation
local owner = ARGV[1]     -- the reconciler
local ttl_ms = ARGV[2]    -- the reconcile lease
local step_head = ARGV[3] -- what every step key name starts with: <prefix>S{
local tenant = ARGV[4]    -- the record's tenant (its step key's tag hashes it)
--#include record_layout
--#include held_step

local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now_ms = math.floor(now_us / 1000)

local v = redis.call('GET', rec)
if not v then return {'not_found'} end
local state, _, _, rfence, _, rindex, rheld, rsession, _, _, p = struct.unpack(HEAD, v)
if state == 'P' then
  local _, lease, replay_ms, q = struct.unpack(PROGRESS, v, p)
  if lease > now_us then return {'not_resolvable'} end
  v = 'U' .. string.sub(v, 2, p - 1) .. string.sub(v, q)
  redis.call('SET', rec, v, 'PX', replay_ms)
  if rheld == 1 then redis.call('PEXPIRE', held_step(rsession, rindex), replay_ms) end
elseif state ~= 'U' then
  return {'not_resolvable'}
end
local fence = string.format('%d', rfence)
local st = {f = fence, n = 0}
local raw = redis.call('GET', rq)
if raw then
  local old = cjson.decode(raw)
  if old.f == fence then st = old end
end
if st.o and st.o ~= owner and tonumber(st.l) > now_ms then return {'held'} end
st.o = owner
st.l = now_ms + tonumber(ttl_ms)
local encoded = cjson.encode(st)
redis.call('SET', rq, encoded, 'PX', redis.call('PTTL', rec))
return {'ok', v, encoded}
