-- effect: reserve an effect value for a claimed record, or name the record
-- that holds it (see effects.go and docs/idempotency.md). The
-- reservation is a lock taken after the record's claim: on Redis Cluster
-- it lives in another slot than the record, so the two cannot be one
-- script, and a claim runs its tool only once it holds both.
--
-- The reservation's value is a take of its holder: "\0", the owner token
-- of the claim that took it (B c0), then the holder's identity — its
-- record key name, fingerprint and step (effects.go packs both). A value
-- without the "\0" head (an earlier build's) is the identity alone. The
-- caller checks a holder it finds and, if that record is gone, asks again
-- with expect set to the stale value: only that value is replaced
-- (compare and set), so of two callers that found the same stale holder
-- one wins. A claim of the holder's own record takes it again under its
-- own owner token, so a compare and set (or a sweep) that judged the
-- former take stale no longer matches once the record is back.
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
local holder = ARGV[1]            -- the caller's holder identity
local take = ARGV[2]              -- the caller's take: the value it writes
local expect = ARGV[3]            -- a stale value to replace ("" none)

local v = redis.call('GET', effect)
if v then
  local identity = v
  if string.byte(v, 1) == 0 then identity = string.sub(v, 3 + string.byte(v, 2)) end
  if identity == holder then
    if v == take then
      redis.call('PERSIST', effect) -- an earlier build's reservation had a TTL
    else
      redis.call('SET', effect, take)
    end
    return 1
  end
  if v ~= expect then return v end
end
redis.call('SET', effect, take)
return 1
