-- release: delete the record and free its step, if the caller still owns
-- it (a retry then runs the tool again).
--
-- KEYS[1] record
-- ARGV    owner (packed), fencing token
--
-- Returns 1, or 0 if the lease is lost. Layout: see claim.lua.
local rec = KEYS[1]
local owner, fence = ARGV[1], ARGV[2]

local v = redis.call('GET', rec)
if not v or string.byte(v, 1) ~= 80 then return 0 end -- 80: 'P'
local _, _, _, rfence, _, rstep, rheld, _, p = struct.unpack('>c1Bc0Bc0I8I8Bc0BHc0', v)
local rowner = struct.unpack('>Bc0', v, p)
if rowner ~= owner or string.format('%d', rfence) ~= fence then return 0 end
redis.call('DEL', rec)
if rheld == 1 then redis.call('DEL', rstep) end
return 1
