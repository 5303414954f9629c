package redisstore

import "github.com/redis/go-redis/v9"

// The Lua scripts. Times are microseconds of the Redis server's clock
// (redis.call('TIME')), so replicas with skewed clocks agree on leases.
// Numbers are written with string.format('%d') because Redis would print a
// Lua number above 1e14 in exponent notation.
//
// A record hash holds: state, tenant, tool, key, fp (fingerprint), exec
// (execution id), owner, fence (fencing token), created, lease (lease end),
// expires, replay (the claim's replay TTL in ms, for Renew), step (the name
// of the step key it holds, or ""), and status, ctype, body once COMPLETED.
//
// Scripts that follow a name stored in a key (a step key's record, a
// record's step key) stay in one Cluster slot: both names carry the same
// hash tag by construction (see keyLayout), which Cluster permits.

// luaCommon is prepended to every script.
const luaCommon = `
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function int(n) return string.format('%d', n) end
-- the step key rec holds, or nil
local function bound_step(rec, step)
  if step and step ~= '' and redis.call('GET', step) == rec then return step end
  return nil
end
`

// claimScript decides a request in one step.
//
// KEYS[1] record, KEYS[2] step key (absent without a step).
// ARGV tenant, tool, key, fingerprint, execution id, owner, lock ms,
// replay ms, lease-expiry policy, step guard ("1"/"0").
//
// Returns {"claimed", exec, fence, takenOver "1"/"0"} | {"replay", exec,
// status, content type, body} | {"in_progress", exec, remaining µs} |
// {"key_reused"} | {"unknown", exec} | {"step_conflict", tool, exec}.
var claimScript = redis.NewScript(luaCommon + `
local rec, stepkey = KEYS[1], KEYS[2]
local lock_ms, replay_ms = tonumber(ARGV[7]), tonumber(ARGV[8])
local now = now_us()
local lease_end = now + lock_ms * 1000
local ttl_ms = int(lock_ms + replay_ms)

local f = redis.call('HMGET', rec, 'state', 'fp', 'exec', 'lease', 'fence', 'status', 'ctype', 'body', 'step', 'owner')
local state = f[1]
if state then
  if f[2] ~= ARGV[4] then return {'key_reused'} end
  if state == 'COMPLETED' then return {'replay', f[3], f[6], f[7], f[8]} end
  if state == 'UNKNOWN' then return {'unknown', f[3]} end
  -- The same claim again (a client resent it after losing the reply): it
  -- already owns the record, so it gets its claim, not "in progress".
  if f[10] == ARGV[6] then return {'claimed', f[3], f[5], '0'} end
  local lease = tonumber(f[4])
  if lease > now then return {'in_progress', f[3], int(lease - now)} end
  local step = bound_step(rec, f[9])
  if ARGV[9] == 'unknown' then
    redis.call('HSET', rec, 'state', 'UNKNOWN', 'expires', int(now + replay_ms * 1000))
    redis.call('HDEL', rec, 'owner', 'lease')
    redis.call('PEXPIRE', rec, ARGV[8])
    if step then redis.call('PEXPIRE', step, ARGV[8]) end
    return {'unknown', f[3]}
  end
  local fence = math.max(tonumber(f[5]) + 1, now)
  redis.call('HSET', rec, 'exec', ARGV[5], 'owner', ARGV[6], 'fence', int(fence),
    'lease', int(lease_end), 'expires', int(lease_end + replay_ms * 1000), 'replay', ARGV[8])
  redis.call('PEXPIRE', rec, ttl_ms)
  if step then redis.call('PEXPIRE', step, ttl_ms) end
  return {'claimed', ARGV[5], int(fence), '1'}
end

local bind = stepkey
if stepkey then
  local holder = redis.call('GET', stepkey)
  if holder and holder ~= rec then
    local h = redis.call('HMGET', holder, 'tool', 'exec', 'step')
    if h[2] and h[3] == stepkey then
      if ARGV[10] == '1' then return {'step_conflict', h[1], h[2]} end
      bind = nil -- unguarded: leave the step to its holder
    end
  end
end
-- No earlier token survives a deletion, so the clock is the floor.
local fence = now
redis.call('HSET', rec, 'state', 'IN_PROGRESS', 'tenant', ARGV[1], 'tool', ARGV[2], 'key', ARGV[3],
  'fp', ARGV[4], 'exec', ARGV[5], 'owner', ARGV[6], 'fence', int(fence), 'created', int(now),
  'lease', int(lease_end), 'expires', int(lease_end + replay_ms * 1000), 'replay', ARGV[8],
  'step', bind or '')
redis.call('PEXPIRE', rec, ttl_ms)
if bind then redis.call('SET', bind, rec, 'PX', ttl_ms) end
return {'claimed', ARGV[5], int(fence), '0'}
`)

// luaOwned checks that the caller still owns an IN_PROGRESS record
// (KEYS[1]; ARGV[1] owner, ARGV[2] fencing token) and loads its fields.
const luaOwned = `
local rec = KEYS[1]
local f = redis.call('HMGET', rec, 'state', 'owner', 'fence', 'replay', 'step')
if f[1] ~= 'IN_PROGRESS' or f[2] ~= ARGV[1] or f[3] ~= ARGV[2] then return 0 end
local step = bound_step(rec, f[5])
local now = now_us()
`

// renewScript extends the lease to ARGV[3] ms from now; the record (and its
// step) then lives that long plus the replay TTL. Returns 1, or 0 if the
// lease is lost.
var renewScript = redis.NewScript(luaCommon + luaOwned + `
local lease_end = now + tonumber(ARGV[3]) * 1000
local ttl_ms = int(tonumber(ARGV[3]) + tonumber(f[4]))
redis.call('HSET', rec, 'lease', int(lease_end), 'expires', int(lease_end + tonumber(f[4]) * 1000))
redis.call('PEXPIRE', rec, ttl_ms)
if step then redis.call('PEXPIRE', step, ttl_ms) end
return 1
`)

// completeScript stores the response (ARGV[4] status, ARGV[5] content type,
// ARGV[6] body) as COMPLETED for ARGV[3] ms. Returns 1, or 0 if the lease
// is lost.
var completeScript = redis.NewScript(luaCommon + luaOwned + `
redis.call('HSET', rec, 'state', 'COMPLETED', 'status', ARGV[4], 'ctype', ARGV[5], 'body', ARGV[6],
  'expires', int(now + tonumber(ARGV[3]) * 1000))
redis.call('HDEL', rec, 'owner', 'lease')
redis.call('PEXPIRE', rec, ARGV[3])
if step then redis.call('PEXPIRE', step, ARGV[3]) end
return 1
`)

// releaseScript deletes the record and frees its step. Returns 1, or 0 if
// the lease is lost.
var releaseScript = redis.NewScript(luaCommon + luaOwned + `
redis.call('DEL', rec)
if step then redis.call('DEL', step) end
return 1
`)

// deleteScript removes the record KEYS[1] if it holds the scope ARGV[1]
// tenant, ARGV[2] tool, ARGV[3] key, and frees its step. Returns 1, or 0 if
// there is no such record.
var deleteScript = redis.NewScript(luaCommon + `
local rec = KEYS[1]
local f = redis.call('HMGET', rec, 'tenant', 'tool', 'key', 'step')
if f[1] ~= ARGV[1] or f[2] ~= ARGV[2] or f[3] ~= ARGV[3] then return 0 end
local step = bound_step(rec, f[4])
redis.call('DEL', rec)
if step then redis.call('DEL', step) end
return 1
`)

// pointScript adds the record name ARGV[1] to the pointer set KEYS[1] and
// makes the set live at least ARGV[2] ms (never shorter than it already
// does, since the set may name a longer-lived record).
var pointScript = redis.NewScript(`
redis.call('SADD', KEYS[1], ARGV[1])
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 1
`)
