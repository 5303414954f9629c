-- reconcile_drop: delete the record (and free its step) because the tool's
-- owner said the call did not commit, if the record is still UNKNOWN
-- under the fencing token and the reconciler holds its reconcile lease
-- (see reconcile_claim.lua).
--
-- Returns 1 ({1, entry, bucket...} when the caller is to drop the
-- entry from those buckets: split), or 0 if the lease is lost. Layout: see claim.lua.
local rec = KEYS[1]     -- the record
local rq = KEYS[2]      -- its reconciliation
local charged = KEYS[3] -- its charged budget buckets (budget.lua)
local owner = ARGV[1]   -- the reconciler
local fence = ARGV[2]   -- the record's fencing token (decimal)
local step_head = ARGV[3] -- what every step key name starts with: <prefix>S{
local tenant = ARGV[4]  -- the record's tenant (its step key's tag hashes it)
local split = ARGV[5] == '1' -- Redis Cluster: the buckets are released by the caller (release_charges)
local HEAD = '>c1Bc0Bc0I8I8Bc0BHc0Hc0Hc0'
--#include held_step
--#include release_charges

local v = redis.call('GET', rec)
if not v or string.byte(v, 1) ~= 85 then return 0 end -- 85: 'U'
local _, _, _, rfence, rcreated, rindex, rheld, rsession = struct.unpack(HEAD, v)
if string.format('%d', rfence) ~= fence then return 0 end
local raw = redis.call('GET', rq)
if not raw then return 0 end
local st = cjson.decode(raw)
if st.f ~= fence or st.o ~= owner then return 0 end
redis.call('DEL', rec, rq)
local freed = release_charges(charged, rcreated, split)
if rheld == 1 then redis.call('DEL', held_step(rsession, rindex)) end
if #freed > 0 then return {1, rec .. '|' .. string.format('%d', rcreated), unpack(freed)} end
return 1
