-- resolve: an operator's answer for a record nobody will complete — an
-- UNKNOWN one, or an IN_PROGRESS one whose lease has expired — stored as
-- COMPLETED with the same execution id, fingerprint, fencing token and
-- step, so the agent's retry replays it.
--
-- Returns {"ok", the new record value} | {"not_resolvable"} | {"not_found"}.
-- Layout: see claim.lua.
local rec = KEYS[1]               -- the record
local ttl_ms = ARGV[1]            -- how long the response is kept
local status = tonumber(ARGV[2])  -- the operator's status
local ctype = ARGV[3]             -- content type (packed)
local body = ARGV[4]              -- body
local step_head = ARGV[5]         -- what every step key name starts with: <prefix>S{
local tenant = ARGV[6]            -- the record's tenant (its step key's tag hashes it)
--#include record_layout
local DONE = '>HHc0'
--#include held_step

local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local v = redis.call('GET', rec)
if not v then return {'not_found'} end
local state, _, _, _, _, rindex, rheld, rsession, _, _, p = struct.unpack(HEAD, v)
if state ~= 'P' and state ~= 'U' then return {'not_resolvable'} end -- COMPLETED, or an approval
if state == 'P' then
  local _, lease = struct.unpack(PROGRESS, v, p)
  if lease > clock() then return {'not_resolvable'} end
end
local nv = 'C' .. string.sub(v, 2, p - 1) .. struct.pack(DONE, status, #ctype, ctype) .. body
redis.call('SET', rec, nv, 'PX', ttl_ms)
if rheld == 1 then redis.call('PEXPIRE', held_step(rsession, rindex), ttl_ms) end
return {'ok', nv}
