-- claim: decide one request in one atomic step (see docs/idempotency.md).
--
-- KEYS    record, then step key (if ARGV[8] is "1"), then the previous
--         layout's record and step key (if ARGV[9] is "1"; same slot)
-- ARGV    fingerprint, execution id, owner (each packed, see packID),
--         lock ms, replay ms, lease-expiry policy, step guard ("1"/"0"),
--         has step, look at the previous layout, session id,
--         fingerprint as text (the previous layout stored it so)
--
-- Returns {"claimed", exec, fence, taken over "1"/"0"}
--       | {"replay", exec, status, content type, body}
--       | {"in_progress", exec, remaining µs}
--       | {"key_reused"} | {"unknown", exec}
--       | {"step_conflict", "n", holder's record name, exec}
--       | {"step_conflict", "o", holder's tool, exec}  (previous layout)
-- where exec is packed ("t" + text for a record of the previous layout).
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
--   session   H c0 session id ("" without a step; the admin API shows it)
--   then for 'P': owner B c0, lease end I8 (µs), replay ms I8
--        for 'C': status H, content type H c0, body (the rest)
-- Tenant, tool and key are in the record's key name, not the value. A
-- live record that holds its step is, by construction, the step key's
-- value, so the scripts extend the step key without reading it.
local rec = KEYS[1]
local fp, exec, owner = ARGV[1], ARGV[2], ARGV[3]
local lock_ms, replay_ms = tonumber(ARGV[4]), tonumber(ARGV[5])
local lease_expiry, step_guard = ARGV[6], ARGV[7] == '1'
local has_step, legacy = ARGV[8] == '1', ARGV[9] == '1'
local session, fp_text = ARGV[10], ARGV[11]
local stepkey = has_step and KEYS[2] or nil
local oldrec, oldstep
if legacy then
  local i = has_step and 3 or 2
  oldrec = KEYS[i]
  if has_step then oldstep = KEYS[i + 1] end
end

local HEAD = '>c1Bc0Bc0I8I8Bc0BHc0'
local function int(n) return string.format('%d', n) end
local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function in_progress(e, fence, created, step, held, sess, own, lease_end)
  return struct.pack(HEAD, 'P', #fp, fp, #e, e, fence, created, #step, step, held, #sess, sess)
    .. struct.pack('>Bc0I8I8', #own, own, lease_end, replay_ms)
end
local ttl_ms = lock_ms + replay_ms

local v = redis.call('GET', rec)
if v then
  local state, rfp, rexec, rfence, rcreated, rstep, rheld, rsession, p = struct.unpack(HEAD, v)
  if rfp ~= fp then return {'key_reused'} end
  if state == 'C' then
    local status, ctype, q = struct.unpack('>HHc0', v, p)
    return {'replay', rexec, tostring(status), ctype, string.sub(v, q)}
  end
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
  redis.call('SET', rec, in_progress(exec, fence, rcreated, rstep, rheld, rsession, owner, now + lock_ms * 1000), 'PX', ttl_ms)
  if rheld == 1 then redis.call('PEXPIRE', rstep, ttl_ms) end
  return {'claimed', exec, int(fence), '1'}
end

-- A record of the previous layout (a hash; see legacy_claim.lua) decides
-- the same way until the upgrade window ends. An expired claim of it that
-- is taken over moves to the new layout.
local now = nil
local floor, taken = 0, '0'
if oldrec then
  local f = redis.call('HMGET', oldrec, 'state', 'fp', 'exec', 'lease', 'fence', 'status', 'ctype', 'body', 'step')
  if f[1] then
    if f[2] ~= fp_text then return {'key_reused'} end
    if f[1] == 'COMPLETED' then return {'replay', 't' .. f[3], f[6], f[7], f[8]} end
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
    floor, taken = tonumber(f[5]) + 1, '1'
    redis.call('DEL', oldrec)
    if held then redis.call('DEL', f[9]) end
  end
end

local bind = stepkey
if stepkey then
  local decided = false
  local holder = redis.call('GET', stepkey)
  if holder and holder ~= rec then
    local hv = redis.call('GET', holder)
    if hv then
      local _, _, hexec, _, _, hstep, hheld = struct.unpack(HEAD, hv)
      if hheld == 1 and hstep == stepkey then
        if step_guard then return {'step_conflict', 'n', holder, hexec} end
        bind, decided = nil, true -- unguarded: leave the step to its holder
      end
    end
  end
  if not decided and oldstep then
    local oh = redis.call('GET', oldstep)
    if oh and oh ~= oldrec then
      local h = redis.call('HMGET', oh, 'tool', 'exec', 'step')
      if h[2] and h[3] == oldstep then
        if step_guard then return {'step_conflict', 'o', h[1], 't' .. h[2]} end
        bind = nil
      end
    end
  end
end
-- No earlier token survives a deletion, so the clock is the floor.
now = now or clock()
local fence = math.max(floor, now)
redis.call('SET', rec, in_progress(exec, fence, now, stepkey or '', bind and 1 or 0, session, owner, now + lock_ms * 1000), 'PX', ttl_ms)
if bind then redis.call('SET', bind, rec, 'PX', ttl_ms) end
return {'claimed', exec, int(fence), taken}
