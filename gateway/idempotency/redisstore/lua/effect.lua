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
-- The reservation has no TTL: it cannot expire while its holder's record
-- lives, whatever extends that record (a completion, a resolve, a
-- reconciliation, a takeover) and in whatever slot it is. It goes when its
-- holder releases the record (effect_drop.lua), or once the holder is
-- gone: replaced here by the next claim of the value, or removed by the
-- store's sweep (effect_drop.lua again).
--
-- Returns 1 when the reservation is (now) the caller's; else the holder's
-- value.
local effect = KEYS[1]            -- the effect's reservation
local holder = ARGV[1]            -- the caller's holder value
local expect = ARGV[2]            -- a stale holder value to replace ("" none)

local v = redis.call('GET', effect)
if v == holder then
  redis.call('PERSIST', effect) -- an earlier build's reservation had a TTL
  return 1
end
if v and v ~= expect then return v end
redis.call('SET', effect, holder)
return 1
