-- reconcile_complete: store the outcome the tool's owner confirmed as
-- COMPLETED (as resolve.lua does), resolved by reconciliation, if the
-- record is still UNKNOWN under the fencing token and the reconciler
-- holds its reconcile lease (see reconcile_claim.lua).
--
-- Returns {record value, state}, or 0 if the lease is lost.
-- Layout: see claim.lua.
local rec = KEYS[1]               -- the record
local rq = KEYS[2]                -- its reconciliation
local owner = ARGV[1]             -- the reconciler
local fence = ARGV[2]             -- the record's fencing token (decimal)
local ttl_ms = ARGV[3]            -- how long the response is kept
local status = tonumber(ARGV[4])  -- the confirmed status
local ctype = ARGV[5]             -- content type (packed)
local body = ARGV[6]              -- body
local step_head = ARGV[7]         -- what every step key name starts with: <prefix>S{
local tenant = ARGV[8]            -- the record's tenant (its step key's tag hashes it)
--#include record_layout
local DONE = '>HHc0'
--#include held_step

local v = redis.call('GET', rec)
if not v or string.byte(v, 1) ~= 85 then return 0 end -- 85: 'U'
local _, _, _, rfence, _, rindex, rheld, rsession, _, _, p = struct.unpack(HEAD, v)
if string.format('%d', rfence) ~= fence then return 0 end
local raw = redis.call('GET', rq)
if not raw then return 0 end
local st = cjson.decode(raw)
if st.f ~= fence or st.o ~= owner then return 0 end
local nv = 'C' .. string.sub(v, 2, p - 1) .. struct.pack(DONE, status, #ctype, ctype) .. body
redis.call('SET', rec, nv, 'PX', ttl_ms)
if rheld == 1 then redis.call('PEXPIRE', held_step(rsession, rindex), ttl_ms) end
st.o = nil
st.l = nil
st.rb = 'reconcile'
local encoded = cjson.encode(st)
redis.call('SET', rq, encoded, 'PX', ttl_ms)
return {nv, encoded}
