-- claim: decide one request in one atomic step (see docs/idempotency.md).
--
-- KEYS and ARGV are named below, one per line, in the order of the Go
-- struct that builds them (claimArgs in claim.go; a test holds them equal).
--
-- Returns the record value itself when it is COMPLETED with this
-- fingerprint (a replay: the cheapest answer, decoded by the store)
--       | fence (an integer: a new claim with this request's execution id;
--         negative: -fence, a takeover)
--       | {"claimed", exec, fence, "0"}  (the same owner's claim again)
--       | {"in_progress", exec, remaining µs}
--       | {"key_reused"} | {"unknown", exec}
--       | {"step_conflict", step value of the holder}
--       | {"awaiting_approval", exec, approval} | {"approval_denied", approval}
--       | {"approval_expired", approval}
--       | {"consumed", fence, approval}  (an approval record claimed: it runs)
--       | {"gone"}  (holder_only: no record)
-- where exec is packed (see packID) and approval is the record's APPROVAL
-- block as stored.
--
-- The record is ONE string (struct.pack, big-endian), rewritten whole by
-- every transition — a hash with a 120-byte body leaves the compact
-- listpack encoding and costs four times the bytes:
--   state     c1   'P' IN_PROGRESS, 'C' COMPLETED, 'U' UNKNOWN,
--                  'A' AWAITING_APPROVAL, 'Y' APPROVED, 'N' DENIED
--   fp        B c0 fingerprint (packed)
--   exec      B c0 execution id (packed)
--   fence     I8   fencing token (µs of the Redis clock at its claim, or
--                  the previous token + 1)
--   created   I8   µs of the Redis clock
--   step      B c0 the claim's step index, decimal ("" without a step)
--   held      B    1 if the record holds that step's entry, whose name
--                  held_step rebuilds from session and step index
--   session   H c0 session id (packed; "" without a step; for the admin API)
--   requester H c0 the principal id of the call that wrote the record
--                  ("" for none); a takeover or consumption keeps it
--   identity  H c0 which identity keyed the call (JSON text, the claim's
--                  identity argument; "" for the gateway's own); kept
--                  like the requester
--   then for 'P': owner B c0, lease end I8 (µs), replay ms I8, then the
--                 canonical arguments (the rest)
--        for 'U': the canonical arguments (the rest)
--        for 'C': status H, content type H c0 (packed), body (the rest)
--        for 'A', 'Y', 'N': APPROVAL — approval id B c0 (packed), rule I8,
--                 reason H c0, approver B c0, requested I8 (µs), expires
--                 I8 (µs: pending, its timeout; approved, its use-within;
--                 denied, kept from pending), use-within ms I8, replay ms
--                 I8, decided by H c0, decided at I8 (µs, 0: not yet),
--                 note H c0, requester H c0, quorum B, binding H c0,
--                 approved by I4 c0 (the principals who approved so far,
--                 in order, each H c0: APPROVER), claimed by H c0; then
--                 the canonical arguments (the rest).
--                 EXPIRED is not stored: 'A' or 'Y' past its expires.
-- Tenant, tool and key are in the record's key name, not the value.
--
-- The history key (<prefix>H + the record's name after <prefix>R, so in
-- its slot) holds the approval a claim consumed: HISTORY, the record's
-- created µs, then the APPROVAL block as it was; it lives the record's
-- first lease and twice its replay TTL, and is read only beside a record
-- of the same creation time that carries no approval of its own.
--
-- The step key's value is the holder's execution id (B c0, packed) and
-- tool. Every script that changes a record's life changes its held step
-- key's the same way (and deletes it with the record), so a step key that
-- exists belongs to a live record: no script reads the holder itself.
local rec = KEYS[1]          -- the record
local history = KEYS[2]      -- the record's consumed approval (HISTORY), beside it
local stepkey = KEYS[3]      -- the step entry (absent without a step)
local fp = ARGV[1]           -- fingerprint (packed)
local exec = ARGV[2]         -- execution id of a new claim (packed)
local owner = ARGV[3]        -- owner token of a new claim (packed)
local lock_ms = tonumber(ARGV[4])    -- the lease
local replay_ms = tonumber(ARGV[5])  -- how long UNKNOWN (and an expired lease) stay
local lease_expiry = ARGV[6] -- "rerun" | "unknown" | "" (rerun)
local step_guard = ARGV[7] == '1'
local session = ARGV[8]      -- session id (packed; "" without a step)
local tool = ARGV[9]         -- the tool's name, for the step entry
local args = ARGV[10]        -- canonical arguments, kept while IN_PROGRESS or UNKNOWN
local approval = ARGV[11]    -- approval id of a call to approve (packed; "" when allowed)
local rule = tonumber(ARGV[12])         -- the deciding rule's index
local reason = ARGV[13]                 -- its reason
local approver = ARGV[14]               -- "operator" | "caller"
local timeout_ms = tonumber(ARGV[15])   -- how long the approval may stay pending
local use_ms = tonumber(ARGV[16])       -- how long an approved call may wait to run
local requester = ARGV[17]              -- the call's principal id, kept by a new record
local quorum = tonumber(ARGV[18])       -- distinct approvers needed (0 and 1: one)
local binding = ARGV[19]                -- hash of the tool's decide config and definition
local step_index = ARGV[20]  -- the step index, decimal ("" without a step)
local step_head = ARGV[21]   -- what every step key name starts with: <prefix>S{
local tenant = ARGV[22]      -- the record's tenant (its step key's tag hashes it)
local holder_only = ARGV[23] == '1' -- decide on the record holding the call's effect: consume no approval, write no record
local identity = ARGV[24]    -- which identity keyed the call (JSON; "" for the gateway's own), kept by a new record
--#include record_layout
local STEP = '>Bc0'
local APPROVAL = '>Bc0I8Hc0Bc0I8I8I8I8Hc0I8Hc0Hc0BHc0I4c0Hc0'
local HISTORY = '>I8'
--#include held_step

local v
if stepkey then v = redis.call('MGET', rec, stepkey) else v = {redis.call('GET', rec)} end
local holder = v[2]
v = v[1]
-- The replay: a COMPLETED record with this fingerprint goes back as it is.
if v and string.byte(v, 1) == 67 and string.byte(v, 2) == #fp and string.sub(v, 3, 2 + #fp) == fp then return v end

local function int(n) return string.format('%d', n) end
local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function in_progress(e, fence, created, index, held, sess, who, ident, lease_end)
  return struct.pack(HEAD, 'P', #fp, fp, #e, e, fence, created, #index, index, held, #sess, sess, #who, who, #ident, ident)
    .. struct.pack(PROGRESS, #owner, owner, lease_end, replay_ms) .. args
end
local ttl_ms = lock_ms + replay_ms

if v then
  local state, rfp, rexec, rfence, rcreated, rindex, rheld, rsession, rrequester, ridentity, p = struct.unpack(HEAD, v)
  if rfp ~= fp then return {'key_reused'} end
  if state == 'U' then return {'unknown', rexec} end
  if state == 'A' or state == 'Y' or state == 'N' then
    local _, _, _, _, _, aexp, _, _, _, _, _, _, _, _, _, _, q = struct.unpack(APPROVAL, v, p)
    local block = string.sub(v, p, q - 1)
    if state == 'N' then return {'approval_denied', block} end
    local now = clock()
    if aexp <= now then return {'approval_expired', block} end
    if state == 'A' and approval ~= '' then return {'awaiting_approval', rexec, block} end
    -- Another call of the same action: it never consumes this approval.
    if holder_only then return {'awaiting_approval', rexec, block} end
    -- Approved, or pending under rules that now allow the call: it runs,
    -- as a first claim of the record, and the approval is used up.
    local fence = math.max(rfence + 1, now)
    redis.call('SET', rec, in_progress(exec, fence, rcreated, rindex, rheld, rsession, rrequester, ridentity, now + lock_ms * 1000), 'PX', ttl_ms)
    if rheld == 1 then redis.call('SET', held_step(rsession, rindex), struct.pack(STEP, #exec, exec) .. tool, 'PX', ttl_ms) end
    -- The approval stays as history beside the record (CONSUMED), tied to
    -- the record's creation time, which a takeover keeps and a new record
    -- of the scope does not.
    redis.call('SET', history, struct.pack(HISTORY, rcreated) .. block, 'PX', ttl_ms + replay_ms)
    return {'consumed', int(fence), block}
  end
  local rowner, rlease, _, q = struct.unpack(PROGRESS, v, p)
  -- The same claim again (a client resent it after losing the reply): it
  -- already owns the record, so it gets its claim, not "in progress".
  if rowner == owner then return {'claimed', rexec, int(rfence), '0'} end
  local now = clock()
  if rlease > now then return {'in_progress', rexec, int(rlease - now)} end
  if lease_expiry == 'unknown' then
    redis.call('SET', rec, 'U' .. string.sub(v, 2, p - 1) .. string.sub(v, q), 'PX', replay_ms)
    if rheld == 1 then redis.call('PEXPIRE', held_step(rsession, rindex), replay_ms) end
    return {'unknown', rexec}
  end
  local fence = math.max(rfence + 1, now)
  redis.call('SET', rec, in_progress(exec, fence, rcreated, rindex, rheld, rsession, rrequester, ridentity, now + lock_ms * 1000), 'PX', ttl_ms)
  -- The step now names the new execution.
  if rheld == 1 then redis.call('SET', held_step(rsession, rindex), struct.pack(STEP, #exec, exec) .. tool, 'PX', ttl_ms) end
  return -fence
end

if holder_only then return {'gone'} end -- the effect's holder is gone: its reservation is stale
local bind = stepkey
if holder then
  if step_guard then return {'step_conflict', holder} end
  bind = nil -- unguarded: leave the step to its holder
end
-- No earlier token survives a deletion, so the clock is the floor.
local now = clock()
if approval ~= '' then
  -- The rules say approve: the call waits for a decision, nothing runs.
  local life = timeout_ms + replay_ms
  local block = struct.pack(APPROVAL, #approval, approval, rule, #reason, reason, #approver, approver,
    now, now + timeout_ms * 1000, use_ms, replay_ms, 0, '', 0, 0, '', #requester, requester, quorum,
    #binding, binding, 0, '', 0, '')
  redis.call('SET', rec, struct.pack(HEAD, 'A', #fp, fp, #exec, exec, 0, now, #step_index, step_index,
    bind and 1 or 0, #session, session, #requester, requester, #identity, identity) .. block .. args, 'PX', life)
  if bind then redis.call('SET', bind, struct.pack(STEP, #exec, exec) .. tool, 'PX', life) end
  return {'awaiting_approval', exec, block}
end
redis.call('SET', rec, in_progress(exec, now, now, step_index, bind and 1 or 0, session, requester, identity, now + lock_ms * 1000), 'PX', ttl_ms)
if bind then redis.call('SET', bind, struct.pack(STEP, #exec, exec) .. tool, 'PX', ttl_ms) end
return now
