-- approve: decide a pending approval (admin, or the caller's own human),
-- on the record alone: the approval index that led here lives in another
-- slot, so the record's own approval id is the check.
--
-- Returns {"ok", the new record value, its PEXPIRETIME}
--       | {"not_pending", the record value} (decided or expired)
--       | {"not_found"} (no record, or one not carrying this approval).
-- Approved: usable for its use-within from now, the record (and its step)
-- living its replay TTL past that; denied: its replay TTL from now, the
-- approval keeping its expiry (a denial is not an expiry).
-- Layout: see claim.lua.
local rec = KEYS[1]             -- the record the index names
local id = ARGV[1]              -- the approval id (packed)
local approve = ARGV[2] == '1'  -- approve or deny
local by = ARGV[3]              -- who decided
local note = ARGV[4]            -- the decider's note
local step_head = ARGV[5]       -- what every step key name starts with: <prefix>S{
local tenant = ARGV[6]          -- the record's tenant (its step key's tag hashes it)
--#include record_layout
local APPROVAL = '>Bc0I8Hc0Bc0I8I8I8I8Hc0I8Hc0'
--#include held_step

local v = redis.call('GET', rec)
if not v then return {'not_found'} end
local state, _, _, _, _, rindex, rheld, rsession, p = struct.unpack(HEAD, v)
if state ~= 'A' and state ~= 'Y' and state ~= 'N' then return {'not_found'} end
local aid, rule, reason, approver, requested, aexp, use_ms, replay_ms, _, _, _, q = struct.unpack(APPROVAL, v, p)
if aid ~= id then return {'not_found'} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
if state ~= 'A' or aexp <= now then return {'not_pending', v} end

local nstate, expires, ttl_ms = 'N', aexp, replay_ms
if approve then nstate, expires, ttl_ms = 'Y', now + use_ms * 1000, use_ms + replay_ms end
local nv = nstate .. string.sub(v, 2, p - 1)
  .. struct.pack(APPROVAL, #aid, aid, rule, #reason, reason, #approver, approver, requested, expires,
    use_ms, replay_ms, #by, by, now, #note, note)
  .. string.sub(v, q)
redis.call('SET', rec, nv, 'PX', ttl_ms)
if rheld == 1 then redis.call('PEXPIRE', held_step(rsession, rindex), ttl_ms) end
return {'ok', nv, string.format('%d', redis.call('PEXPIRETIME', rec))}
