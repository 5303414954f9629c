-- approve: decide a pending approval (admin, or the caller's own human),
-- on the record alone: the approval index that led here lives in another
-- slot, so the record's own approval id is the check.
--
-- Returns {"ok", the record value, its PEXPIRETIME}
--       | {"not_pending", the record value} (decided or expired)
--       | {"not_found"} (no record, or one not carrying this approval).
-- An approve adds its principal to the approved-by list (a principal
-- already on it counts nothing and changes nothing); until the list holds
-- the quorum the approval stays pending, its life unchanged. Reaching the
-- quorum approves: usable for its use-within from now, the record (and
-- its step) living its replay TTL past that. A deny is final at once: its
-- replay TTL from now, the approval keeping its expiry (a denial is not
-- an expiry). One script, so deciders racing each other count each
-- principal once and leave one final state.
-- Layout: see claim.lua.
local rec = KEYS[1]             -- the record the index names
local id = ARGV[1]              -- the approval id (packed)
local approve = ARGV[2] == '1'  -- approve or deny
local by = ARGV[3]              -- the decider's principal id
local claimed_by = ARGV[4]      -- the name typed with the admin token ("" otherwise)
local note = ARGV[5]            -- the decider's note
local step_head = ARGV[6]       -- what every step key name starts with: <prefix>S{
local tenant = ARGV[7]          -- the record's tenant (its step key's tag hashes it)
--#include record_layout
local APPROVAL = '>Bc0I8Hc0Bc0I8I8I8I8Hc0I8Hc0Hc0BHc0I4c0Hc0'
local APPROVER = '>Hc0'
--#include held_step

local v = redis.call('GET', rec)
if not v then return {'not_found'} end
local state, _, _, _, _, rindex, rheld, rsession, _, _, p = struct.unpack(HEAD, v)
if state ~= 'A' and state ~= 'Y' and state ~= 'N' then return {'not_found'} end
local aid, rule, reason, approver, requested, aexp, use_ms, replay_ms, _, _, _, requester, quorum, binding,
  approved, _, q = struct.unpack(APPROVAL, v, p)
if aid ~= id then return {'not_found'} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
if state ~= 'A' or aexp <= now then return {'not_pending', v} end

local nstate, expires, ttl_ms = 'N', aexp, replay_ms
local dby, dclaimed, dat, dnote = by, claimed_by, now, note
if approve then
  local count, i = 0, 1
  while i <= #approved do
    local who
    who, i = struct.unpack(APPROVER, approved, i)
    if who == by then return {'ok', v, string.format('%d', redis.call('PEXPIRETIME', rec))} end
    count = count + 1
  end
  approved = approved .. struct.pack(APPROVER, #by, by)
  if count + 1 < math.max(quorum, 1) then
    nstate, expires, ttl_ms = 'A', aexp, nil
    dby, dclaimed, dat, dnote = '', '', 0, ''
  else
    nstate, expires, ttl_ms = 'Y', now + use_ms * 1000, use_ms + replay_ms
  end
end
local nv = nstate .. string.sub(v, 2, p - 1)
  .. struct.pack(APPROVAL, #aid, aid, rule, #reason, reason, #approver, approver, requested, expires,
    use_ms, replay_ms, #dby, dby, dat, #dnote, dnote, #requester, requester, quorum, #binding, binding,
    #approved, approved, #dclaimed, dclaimed)
  .. string.sub(v, q)
if ttl_ms then
  redis.call('SET', rec, nv, 'PX', ttl_ms)
  if rheld == 1 then redis.call('PEXPIRE', held_step(rsession, rindex), ttl_ms) end
else
  redis.call('SET', rec, nv, 'KEEPTTL') -- still pending: its life is unchanged
end
return {'ok', nv, string.format('%d', redis.call('PEXPIRETIME', rec))}
