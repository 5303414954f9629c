-- effect: reserve an effect value for a claimed record, or name the record
-- that holds it (see effects.go and docs/idempotency.md). The
-- reservation is a lock taken after the record's claim: on Redis Cluster
-- it lives in another slot than the record, so the two cannot be one
-- script, and a claim runs its tool only once it holds both.
--
-- The reservation's value names its holder: its record key name,
-- fingerprint and step (effects.go packs it). The caller checks a holder
-- it finds and, if that record is gone, asks again with expect set to the
-- stale value: only that value is replaced (compare and set), so of two
-- callers that found the same stale holder one wins.
--
-- Returns 1 when the reservation is (now) the caller's, living at least
-- ttl ms; else the holder's value.
local effect = KEYS[1]            -- the effect's reservation
local holder = ARGV[1]            -- the caller's holder value
local expect = ARGV[2]            -- a stale holder value to replace ("" none)
local ttl_ms = tonumber(ARGV[3])  -- how long the reservation lives at least

local v = redis.call('GET', effect)
if v == holder then
  if redis.call('PTTL', effect) < ttl_ms then redis.call('PEXPIRE', effect, ttl_ms) end
  return 1
end
if v and v ~= expect then return v end
redis.call('SET', effect, holder, 'PX', ttl_ms)
return 1
