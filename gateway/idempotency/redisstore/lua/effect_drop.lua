-- effect_drop: remove an effect's reservation if it still names the
-- holder the caller knows is gone: the record it released (Release), or a
-- record the sweep found missing. Anything else (the value was taken over
-- meanwhile by another record) stays. See effects.go.
--
-- Returns 1 when removed, else 0.
local effect = KEYS[1]            -- the effect's reservation
local holder = ARGV[1]            -- what the value must start with: the holder's packed record name (release) or its whole value (sweep)

local v = redis.call('GET', effect)
if not v or string.sub(v, 1, #holder) ~= holder then return 0 end
redis.call('DEL', effect)
return 1
