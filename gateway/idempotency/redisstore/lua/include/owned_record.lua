-- owned_record reads the record rec as its owner: nil unless it is
-- IN_PROGRESS under the script's owner and fence (a lost lease), else its
-- value v, where its PROGRESS part starts (p) and ends (q), its replay ms,
-- its creation time, and the step entry it holds (held, session, index).
local function owned_record()
  local v = redis.call('GET', rec)
  if not v or string.byte(v, 1) ~= 80 then return nil end -- 80: 'P'
  local _, _, _, rfence, rcreated, rindex, rheld, rsession, p = struct.unpack(HEAD, v)
  local rowner, _, replay_ms, q = struct.unpack(PROGRESS, v, p)
  if rowner ~= owner or string.format('%d', rfence) ~= fence then return nil end
  return v, p, q, replay_ms, rcreated, rheld, rsession, rindex
end
