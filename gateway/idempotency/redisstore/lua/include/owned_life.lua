-- owned_life is the life (created µs, as text) of the record rec when it
-- is IN_PROGRESS under owner, else nil: the record a claim now owns, the
-- only one budget charges go to.
local function owned_life(rec, owner)
  local v = redis.call('GET', rec)
  if not v or string.byte(v, 1) ~= 80 then return nil end -- 80: 'P'
  local _, _, _, _, rcreated, _, _, _, _, _, p = struct.unpack(HEAD, v)
  if struct.unpack(PROGRESS, v, p) ~= owner then return nil end
  return string.format('%d', rcreated)
end
