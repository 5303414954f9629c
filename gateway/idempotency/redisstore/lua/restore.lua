-- restore: put an approval back on the record whose claim consumed it,
-- because that claim runs nothing (it lost the call's effect to another
-- record, see effects.go): the approval belongs to the call, and losing
-- an effect race must not make a person decide it again. Only while the
-- caller still owns the IN_PROGRESS record the claim made.
--
-- The record becomes the approval record it was: pending when the block
-- was never decided (a call the rules now allowed consumed it), approved
-- otherwise, with the block as the claim returned it, the same header
-- (the claim's execution id and fencing token: the token only grows) and
-- the canonical arguments; it and the step it holds expire when the
-- approval record would have (the block's expires + its replay ms).
--
-- Returns 1, or 0 if the lease is lost. Layout: see claim.lua.
local rec = KEYS[1]        -- the record
local owner = ARGV[1]      -- owner token (packed)
local fence = ARGV[2]      -- fencing token (decimal)
local block = ARGV[3]      -- the APPROVAL block the claim consumed, as stored
local step_head = ARGV[4]  -- what every step key name starts with: <prefix>S{
local tenant = ARGV[5]     -- the record's tenant (its step key's tag hashes it)
--#include record_layout
local APPROVAL = '>Bc0I8Hc0Bc0I8I8I8I8Hc0I8Hc0Hc0BHc0I4c0Hc0'
--#include held_step

local v = redis.call('GET', rec)
if not v or string.byte(v, 1) ~= 80 then return 0 end -- 80: 'P'
local _, _, _, rfence, _, rindex, rheld, rsession, _, _, p = struct.unpack(HEAD, v)
local rowner, _, _, q = struct.unpack(PROGRESS, v, p)
if rowner ~= owner or string.format('%d', rfence) ~= fence then return 0 end
local _, _, _, _, _, aexp, _, replay_ms, _, decided = struct.unpack(APPROVAL, block)
local state = 'Y'
if decided == 0 then state = 'A' end
local until_ms = math.floor(aexp / 1000) + replay_ms
redis.call('SET', rec, state .. string.sub(v, 2, p - 1) .. block .. string.sub(v, q))
redis.call('PEXPIREAT', rec, until_ms)
if rheld == 1 then redis.call('PEXPIREAT', held_step(rsession, rindex), until_ms) end
return 1
