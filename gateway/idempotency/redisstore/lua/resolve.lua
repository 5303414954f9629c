-- resolve: an operator's answer for a record nobody will complete — an
-- UNKNOWN one, or an IN_PROGRESS one whose lease has expired — stored as
-- COMPLETED with the same execution id, fingerprint, fencing token and
-- step, so the agent's retry replays it.
--
-- KEYS[1] record
-- ARGV    ttl ms, status, content type, body, layout ("new", or "old": a
--         hash of the previous layout, resolved in place)
--
-- Returns {"ok", the new record value} | {"ok_legacy"}
--       | {"not_resolvable"} | {"not_found"}. Layout: see claim.lua.
local rec = KEYS[1]
local ttl_ms, status, ctype, body, layout = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4], ARGV[5]

local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

if layout == 'new' then
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
end
local f = redis.call('HMGET', rec, 'state', 'lease', 'step')
if not f[1] then return {'not_found'} end
local now = clock()
if f[1] == 'COMPLETED' or (f[1] == 'IN_PROGRESS' and tonumber(f[2]) > now) then return {'not_resolvable'} end
redis.call('HSET', rec, 'state', 'COMPLETED', 'status', tostring(status), 'ctype', ctype, 'body', body,
  'expires', string.format('%d', now + tonumber(ttl_ms) * 1000))
redis.call('HDEL', rec, 'owner', 'lease')
redis.call('PEXPIRE', rec, ttl_ms)
if f[3] and f[3] ~= '' and redis.call('GET', f[3]) == rec then redis.call('PEXPIRE', f[3], ttl_ms) end
return {'ok_legacy'}
