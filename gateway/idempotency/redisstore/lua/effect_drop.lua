-- effect_drop: remove an effect's reservation if it is still the take the
-- caller knows is gone: the one its released record took (Release), or
-- one whose record the sweep found missing. A take made since (the record
-- claimed again, or the value taken by another record) stays. See
-- effects.go; the value's layout is effect.lua's.
--
-- Returns 1 when removed, else 0.
local effect = KEYS[1]            -- the effect's reservation
local owner = ARGV[1]             -- the owner token of the take (packed; "" for a value without one)
local record = ARGV[2]            -- what its identity must start with: the holder's length-prefixed record name

local v = redis.call('GET', effect)
if not v then return 0 end
local took, identity = '', v
if string.byte(v, 1) == 0 then
  local n = string.byte(v, 2)
  took, identity = string.sub(v, 3, 2 + n), string.sub(v, 3 + n)
end
if took ~= owner or string.sub(identity, 1, #record) ~= record then return 0 end
redis.call('DEL', effect)
return 1
