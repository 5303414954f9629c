-- claim: decide one request in one atomic step (see docs/idempotency.md).
--
-- KEYS    record, then step key (if ARGV[8] is "1"), then the previous
--         layout's record and step key (if ARGV[9] is "1"; same slot)
-- ARGV    fingerprint, execution id, owner (each packed, see packID),
--         lock ms, replay ms, lease-expiry policy, step guard ("1"/"0"),
--         has step, look at the previous layout, session id (packed),
--         fingerprint as text (the previous layout stored it so), tool
--
-- Returns the record value itself when it is COMPLETED with this
-- fingerprint (a replay: the cheapest answer, decoded by the store)
--       | fence (an integer: a new claim with this request's execution id;
--         negative: -fence, a takeover)
--       | {"claimed", exec, fence, "0"}  (the same owner's claim again)
--       | {"in_progress", exec, remaining µs}
--       | {"key_reused"} | {"unknown", exec}
--       | {"step_conflict", step value of the holder}
--       | {"replay", exec, status, content type, body}  (previous layout)
-- where exec is packed ("t" + text for a record of the previous layout)
-- and so is the content type ("t" + text, "j" for application/json).
--
-- The record is ONE string (struct.pack, big-endian), rewritten whole by
-- every transition — a hash with a 120-byte body leaves the compact
-- listpack encoding and costs four times the bytes:
--   state     c1   'P' IN_PROGRESS, 'C' COMPLETED, 'U' UNKNOWN
--   fp        B c0 fingerprint (packed)
--   exec      B c0 execution id (packed)
--   fence     I8   fencing token (µs of the Redis clock at its claim, or
--                  the previous token + 1)
--   created   I8   µs of the Redis clock
--   step      B c0 the step key of the claim ("" without a step)
--   held      B    1 if the record holds that step key
--   session   H c0 session id (packed; "" without a step; for the admin API)
--   then for 'P': owner B c0, lease end I8 (µs), replay ms I8
--        for 'C': status H, content type H c0 (packed), body (the rest)
-- Tenant, tool and key are in the record's key name, not the value.
--
-- The step key's value is the holder's execution id (B c0, packed) and
-- tool. Every script that changes a record's life changes its held step
-- key's the same way (and deletes it with the record), so a step key that
-- exists belongs to a live record: no script reads the holder itself.
local rec = KEYS[1]
local fp = ARGV[1]
local has_step, legacy = ARGV[8] == '1', ARGV[9] == '1'
local stepkey = has_step and KEYS[2] or nil
local oldrec, oldstep
if legacy then
  local i = has_step and 3 or 2
  oldrec = KEYS[i]
  if has_step then oldstep = KEYS[i + 1] end
end
local got
if oldstep then got = redis.call('MGET', rec, stepkey, oldstep)
elseif stepkey then got = redis.call('MGET', rec, stepkey)
else got = {redis.call('GET', rec)} end
local v = got[1]
-- The replay: a COMPLETED record with this fingerprint goes back as it is.
if v and string.byte(v, 1) == 67 and string.byte(v, 2) == #fp and string.sub(v, 3, 2 + #fp) == fp then return v end

local exec, owner = ARGV[2], ARGV[3]
local lock_ms, replay_ms = tonumber(ARGV[4]), tonumber(ARGV[5])
local lease_expiry, step_guard = ARGV[6], ARGV[7] == '1'
local session, fp_text, tool = ARGV[10], ARGV[11], ARGV[12]
local HEAD = '>c1Bc0Bc0I8I8Bc0BHc0'
local function int(n) return string.format('%d', n) end
local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function in_progress(e, fence, created, step, held, sess, lease_end)
  return struct.pack(HEAD, 'P', #fp, fp, #e, e, fence, created, #step, step, held, #sess, sess)
    .. struct.pack('>Bc0I8I8', #owner, owner, lease_end, replay_ms)
end
local ttl_ms = lock_ms + replay_ms

if v then
  local state, rfp, rexec, rfence, rcreated, rstep, rheld, rsession, p = struct.unpack(HEAD, v)
  if rfp ~= fp then return {'key_reused'} end
  if state == 'U' then return {'unknown', rexec} end
  local rowner, rlease = struct.unpack('>Bc0I8', v, p)
  -- The same claim again (a client resent it after losing the reply): it
  -- already owns the record, so it gets its claim, not "in progress".
  if rowner == owner then return {'claimed', rexec, int(rfence), '0'} end
  local now = clock()
  if rlease > now then return {'in_progress', rexec, int(rlease - now)} end
  if lease_expiry == 'unknown' then
    redis.call('SET', rec, 'U' .. string.sub(v, 2, p - 1), 'PX', replay_ms)
    if rheld == 1 then redis.call('PEXPIRE', rstep, replay_ms) end
    return {'unknown', rexec}
  end
  local fence = math.max(rfence + 1, now)
  redis.call('SET', rec, in_progress(exec, fence, rcreated, rstep, rheld, rsession, now + lock_ms * 1000), 'PX', ttl_ms)
  -- The step now names the new execution.
  if rheld == 1 then redis.call('SET', rstep, struct.pack('>Bc0', #exec, exec) .. tool, 'PX', ttl_ms) end
  return -fence
end

-- A record of the previous layout (a hash; see legacy_claim.lua) decides
-- the same way until the upgrade window ends. An expired claim of it that
-- is taken over moves to the new layout.
local now = nil
local floor, sign = 0, 1
-- EXISTS first: its reply is cheaper than nine nils for the usual miss.
if oldrec and redis.call('EXISTS', oldrec) == 1 then
  local f = redis.call('HMGET', oldrec, 'state', 'fp', 'exec', 'lease', 'fence', 'status', 'ctype', 'body', 'step')
  if f[1] then
    if f[2] ~= fp_text then return {'key_reused'} end
    if f[1] == 'COMPLETED' then return {'replay', 't' .. f[3], f[6], 't' .. f[7], f[8]} end
    if f[1] == 'UNKNOWN' then return {'unknown', 't' .. f[3]} end
    now = clock()
    local lease = tonumber(f[4])
    if lease > now then return {'in_progress', 't' .. f[3], int(lease - now)} end
    local held = f[9] and f[9] ~= '' and redis.call('GET', f[9]) == oldrec
    if lease_expiry == 'unknown' then
      redis.call('HSET', oldrec, 'state', 'UNKNOWN', 'expires', int(now + replay_ms * 1000))
      redis.call('HDEL', oldrec, 'owner', 'lease')
      redis.call('PEXPIRE', oldrec, replay_ms)
      if held then redis.call('PEXPIRE', f[9], replay_ms) end
      return {'unknown', 't' .. f[3]}
    end
    floor, sign = tonumber(f[5]) + 1, -1
    redis.call('DEL', oldrec)
    if held then
      redis.call('DEL', f[9])
      if f[9] == oldstep then got[3] = nil end
    end
  end
end

local bind = stepkey
if stepkey then
  local holder = got[2]
  if holder then
    if step_guard then return {'step_conflict', holder} end
    bind = nil -- unguarded: leave the step to its holder
  elseif oldstep and got[3] and got[3] ~= oldrec then
    local h = redis.call('HMGET', got[3], 'tool', 'exec', 'step')
    if h[2] and h[3] == oldstep then
      if step_guard then return {'step_conflict', struct.pack('>Bc0', #h[2] + 1, 't' .. h[2]) .. h[1]} end
      bind = nil
    end
  end
end
-- No earlier token survives a deletion, so the clock is the floor.
now = now or clock()
local fence = math.max(floor, now)
redis.call('SET', rec, in_progress(exec, fence, now, stepkey or '', bind and 1 or 0, session, now + lock_ms * 1000), 'PX', ttl_ms)
if bind then redis.call('SET', bind, struct.pack('>Bc0', #exec, exec) .. tool, 'PX', ttl_ms) end
return sign * fence
