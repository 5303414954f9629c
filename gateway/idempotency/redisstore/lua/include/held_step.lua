-- held_step names the step entry a record holds: the name rebuilt from
-- the record's session and step index (keys.go, sessionTag), with the
-- script's step_head and tenant arguments.
local function held_step(sess, index)
  return step_head .. string.sub(redis.sha1hex(tenant .. '\n' .. sess), 1, 16) .. '}' .. index
end
