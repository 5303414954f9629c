-- release_charges drops the budget reservations of the record rec created
-- at created (µs), listed in its charged set: its call did not act, or an
-- operator deleted it (docs/budgets.md).
local function release_charges(charged, created)
  local field = rec .. '|' .. string.format('%d', created)
  for _, key in ipairs(redis.call('SMEMBERS', charged)) do
    local e = redis.call('HGET', key, field)
    if e then
      redis.call('HDEL', key, field)
      redis.call('HINCRBY', key, '=', -tonumber(string.match(e, '^(%d+):')))
    end
  end
  redis.call('DEL', charged)
end
