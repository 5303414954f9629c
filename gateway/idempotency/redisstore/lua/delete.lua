-- delete: remove a record (admin) and free its step. The key name holds
-- the scope, so there is nothing else to check.
--
-- Returns 1, or 0 if there is no such record. Layout: see claim.lua.
local rec = KEYS[1]  -- the record
local HEAD = '>c1Bc0Bc0I8I8Bc0BHc0'

local v = redis.call('GET', rec)
if not v then return 0 end
local _, _, _, _, _, rstep, rheld = struct.unpack(HEAD, v)
redis.call('DEL', rec)
if rheld == 1 then redis.call('DEL', rstep) end
return 1
