-- The previous layout's legacy_claim script, kept verbatim for compat_test.go, which
-- writes records exactly as a gateway before the upgrade did. Not used by
-- the store; remove with the compat path (Options.NoLegacyLayout).
--
-- claim: decide one request in one atomic step (see docs/idempotency.md).
--
-- KEYS[1] record      the record hash
-- KEYS[2] step key    the session step's guard entry (absent without a step)
-- ARGV    tenant, tool, key, fingerprint, execution id, owner,
--         lock ms, replay ms, lease-expiry policy, step guard ("1"/"0")
--
-- Returns {"claimed", exec, fence, taken over "1"/"0"}
--       | {"replay", exec, status, content type, body}
--       | {"in_progress", exec, remaining µs}
--       | {"key_reused"} | {"unknown", exec} | {"step_conflict", tool, exec}
--
-- Record hash fields: state, tenant, tool, key, fp (fingerprint), exec
-- (execution id), owner, fence (fencing token), created, lease (lease end),
-- expires, replay (the claim's replay ms, for renew), step (the name of the
-- step key it holds, or ""), and status, ctype, body once COMPLETED. Times
-- are microseconds of the Redis server's clock, so replicas with skewed
-- clocks agree on leases; numbers are written with %d because Redis would
-- print a Lua number above 1e14 in exponent notation.
local rec, stepkey = KEYS[1], KEYS[2]
local tenant, tool, key = ARGV[1], ARGV[2], ARGV[3]
local fingerprint, exec, owner = ARGV[4], ARGV[5], ARGV[6]
local lock_ms, replay_ms = tonumber(ARGV[7]), tonumber(ARGV[8])
local replay_ms_arg = ARGV[8]
local lease_expiry, step_guard = ARGV[9], ARGV[10] == '1'

local function int(n) return string.format('%d', n) end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local lease_end = now + lock_ms * 1000
local ttl_ms = int(lock_ms + replay_ms)

local f = redis.call('HMGET', rec, 'state', 'fp', 'exec', 'lease', 'fence', 'status', 'ctype', 'body', 'step', 'owner')
local state, rec_fp, rec_exec, rec_lease, rec_fence = f[1], f[2], f[3], f[4], f[5]
local rec_status, rec_ctype, rec_body, rec_step, rec_owner = f[6], f[7], f[8], f[9], f[10]
if state then
  if rec_fp ~= fingerprint then return {'key_reused'} end
  if state == 'COMPLETED' then return {'replay', rec_exec, rec_status, rec_ctype, rec_body} end
  if state == 'UNKNOWN' then return {'unknown', rec_exec} end
  -- The same claim again (a client resent it after losing the reply): it
  -- already owns the record, so it gets its claim, not "in progress".
  if rec_owner == owner then return {'claimed', rec_exec, rec_fence, '0'} end
  local lease = tonumber(rec_lease)
  if lease > now then return {'in_progress', rec_exec, int(lease - now)} end
  -- The step key this record holds, if it still holds it. A step key and
  -- its record share a Cluster hash tag by construction (keyLayout).
  local step = nil
  if rec_step and rec_step ~= '' and redis.call('GET', rec_step) == rec then step = rec_step end
  if lease_expiry == 'unknown' then
    redis.call('HSET', rec, 'state', 'UNKNOWN', 'expires', int(now + replay_ms * 1000))
    redis.call('HDEL', rec, 'owner', 'lease')
    redis.call('PEXPIRE', rec, replay_ms_arg)
    if step then redis.call('PEXPIRE', step, replay_ms_arg) end
    return {'unknown', rec_exec}
  end
  local fence = math.max(tonumber(rec_fence) + 1, now)
  redis.call('HSET', rec, 'exec', exec, 'owner', owner, 'fence', int(fence),
    'lease', int(lease_end), 'expires', int(lease_end + replay_ms * 1000), 'replay', replay_ms_arg)
  redis.call('PEXPIRE', rec, ttl_ms)
  if step then redis.call('PEXPIRE', step, ttl_ms) end
  return {'claimed', exec, int(fence), '1'}
end

local bind = stepkey
if stepkey then
  local holder = redis.call('GET', stepkey)
  if holder and holder ~= rec then
    local h = redis.call('HMGET', holder, 'tool', 'exec', 'step')
    local holder_tool, holder_exec, holder_step = h[1], h[2], h[3]
    if holder_exec and holder_step == stepkey then
      if step_guard then return {'step_conflict', holder_tool, holder_exec} end
      bind = nil -- unguarded: leave the step to its holder
    end
  end
end
-- No earlier token survives a deletion, so the clock is the floor.
local fence = now
redis.call('HSET', rec, 'state', 'IN_PROGRESS', 'tenant', tenant, 'tool', tool, 'key', key,
  'fp', fingerprint, 'exec', exec, 'owner', owner, 'fence', int(fence), 'created', int(now),
  'lease', int(lease_end), 'expires', int(lease_end + replay_ms * 1000), 'replay', replay_ms_arg,
  'step', bind or '')
redis.call('PEXPIRE', rec, ttl_ms)
if bind then redis.call('SET', bind, rec, 'PX', ttl_ms) end
return {'claimed', exec, int(fence), '0'}
