-- effect_keep: keep an effect's reservation alive at least ttl ms, in the
-- pipeline of its holder's Complete or MarkUnknown (see effects.go). It
-- never shortens a reservation, and extending one that names another
-- record is harmless: a reservation counts only while its holder lives.
-- Returns 1.
local effect = KEYS[1]            -- the effect's reservation
local ttl_ms = tonumber(ARGV[1])  -- how long it lives at least

local left = redis.call('PTTL', effect)
if left >= 0 and left < ttl_ms then redis.call('PEXPIRE', effect, ttl_ms) end
return 1
