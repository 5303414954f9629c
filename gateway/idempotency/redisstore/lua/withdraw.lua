-- withdraw: delete a pending approval record its own claim just wrote,
-- because another record holds the call's effect (see effects.go): the
-- call answers as that holder, and nobody is to be asked. Only while the
-- record is still pending under that request's execution id (a person
-- who decided it meanwhile keeps the decision).
--
-- Returns 1, or 0 if the record is no longer that pending approval.
-- Layout: see claim.lua.
local rec = KEYS[1]        -- the record
local exec = ARGV[1]       -- the execution id of the request that wrote it (packed)
local step_head = ARGV[2]  -- what every step key name starts with: <prefix>S{
local tenant = ARGV[3]     -- the record's tenant (its step key's tag hashes it)
local HEAD = '>c1Bc0Bc0I8I8Bc0BHc0Hc0Hc0'
--#include held_step

local v = redis.call('GET', rec)
if not v or string.byte(v, 1) ~= 65 then return 0 end -- 65: 'A'
local _, _, rexec, _, _, rindex, rheld, rsession = struct.unpack(HEAD, v)
if rexec ~= exec then return 0 end
redis.call('DEL', rec)
if rheld == 1 then redis.call('DEL', held_step(rsession, rindex)) end
return 1
