-- acquire: take one of a tenant's in-flight slots for holder when fewer
-- than max live holders are in the set (a holder that has a slot keeps it).
--
-- The set's members are holders scored by when their lease ends (Redis's
-- clock, ms); expired members are removed first, so they never count.
-- Returns 1 when holder has a slot, 0 when all max are taken.
local slots = KEYS[1]              -- the tenant's sorted set of slots
local holder = ARGV[1]             -- the execution that wants a slot
local max = tonumber(ARGV[2])      -- the tenant's max_in_flight
local lease_ms = tonumber(ARGV[3]) -- how long the slot lives unrenewed

-- TIME then writes: replicate effects (the default from Redis 7; asked for
-- explicitly for older servers).
redis.replicate_commands()
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

redis.call('ZREMRANGEBYSCORE', slots, '-inf', now)
if not redis.call('ZSCORE', slots, holder) and redis.call('ZCARD', slots) >= max then
  return 0
end
redis.call('ZADD', slots, now + lease_ms, holder)
if redis.call('PTTL', slots) < lease_ms then redis.call('PEXPIRE', slots, lease_ms) end
return 1
