-- The floor's claim: replay the stored answer, or mark the call in
-- progress, in one atomic step (the least an exactly-once server must do).
--
-- KEYS[1] record_key   the call's record: "" while it runs, then its answer
-- ARGV[1] marker_ttl   milliseconds an in-progress marker lives
--
-- Returns the record's value when one exists ("" = still running), or nil
-- when this call claimed it and must run the tool.
local record_key = KEYS[1]
local marker_ttl = ARGV[1]

local found = redis.call('GET', record_key)
if found then
  return found
end
redis.call('SET', record_key, '', 'PX', marker_ttl)
return nil
