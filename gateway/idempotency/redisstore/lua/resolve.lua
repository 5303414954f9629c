-- resolve: an operator's answer for a record nobody will complete — an
-- UNKNOWN one, or an IN_PROGRESS one whose lease has expired — stored as
-- COMPLETED with the same execution id, fingerprint, fencing token and
-- step, so the agent's retry replays it.
--
-- KEYS[1] record
-- ARGV    ttl ms, status, content type, body
--
-- Returns {"ok", the new record value} | {"not_resolvable"} | {"not_found"}.
-- Layout: see claim.lua.
local rec = KEYS[1]
local ttl_ms, status, ctype, body = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]

local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local v = redis.call('GET', rec)
if not v then return {'not_found'} end
local state, _, _, _, _, rstep, rheld, _, p = struct.unpack('>c1Bc0Bc0I8I8Bc0BHc0', v)
if state == 'C' then return {'not_resolvable'} end
if state == 'P' then
  local _, lease = struct.unpack('>Bc0I8', v, p)
  if lease > clock() then return {'not_resolvable'} end
end
local nv = 'C' .. string.sub(v, 2, p - 1) .. struct.pack('>HHc0', status, #ctype, ctype) .. body
redis.call('SET', rec, nv, 'PX', ttl_ms)
if rheld == 1 then redis.call('PEXPIRE', rstep, ttl_ms) end
return {'ok', nv}
